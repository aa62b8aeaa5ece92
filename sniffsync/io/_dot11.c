/* sniffsync.io._walk.dot11: the 802.11 MAC header and the LLC/SNAP header of a chunk in one pass.
 *
 * What sniffsync.decode.dot11 (_Header, _frame_control, _addresses, _sequence_and_qos,
 * _llc_bounds) and sniffsync.decode.payload.decode_llc compute vectorised, row by row, with
 * the same values everywhere (also where a field is not valid: each frame's first 40 bytes
 * are read as gather reads them, zero past the buffer). The Block Ack / BAR bodies, the
 * management bodies and the (re)association AID stay in Python, on the rows this pass
 * points out (output "part"). The tests compare both decoders on every test capture and
 * on random headers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include "_passes.h"

/* the outputs, in the order sniffsync.decode.dot11c.OUTPUTS lists them, and their item sizes */
enum {
    O_TYPE, O_SUB, O_TYPE_OK, O_TS, O_TS_OK, O_FC1, O_HAS_FC, O_NOT_X, O_TO_DS, O_FROM_DS,
    O_RETRY, O_PROT, O_HTC, O_HTC_OK, O_DUR, O_DUR_OK, O_AID, O_AID_OK, O_RA, O_RA_OK,
    O_TA, O_TA_OK, O_SEQ, O_FRAG, O_SC_OK, O_AMSDU, O_QOS_OK, O_TID, O_SHORT, O_HDR,
    O_IN_SUB, O_WRAP, O_STRIP, O_PART, O_FCS, O_LLC, O_LLC_END, O_L3, O_ETH, O_ETH_OK,
    O_BSSID, O_BSSID_OK, O_SA, O_SA_OK, O_DA, O_DA_OK, N_OUT
};
#define FIRST_ROLE O_BSSID
static const unsigned char OUT_SIZE[N_OUT] = {
    1, 1, 1, 2, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 2, 1, 2, 1, 8, 1,
    8, 1, 2, 2, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 4, 8, 8, 8, 2, 1,
    8, 1, 8, 1, 8, 1,
};

#define WIN 40          /* sniffsync.decode.dot11.WINDOW */
enum { MGMT, CTRL, DATA, EXT };
/* sniffsync.decode.dot11_tables */
static const unsigned char CTRL_HDR_LEN[16] = {4, 4, 16, 16, 16, 16, 10, 16, 16, 16, 16, 16, 10, 10, 16, 16};
static const unsigned char CTRL_HAS_TA[16] = {0, 0, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 1, 1};
static const unsigned char CTRL_BSSID_ADDR[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 2};
static const unsigned char DS_BSSID[4] = {3, 1, 2, 0}, DS_SA[4] = {2, 2, 3, 4}, DS_DA[4] = {1, 3, 1, 3};
static const unsigned char ADDR_OFF[5] = {0, 4, 10, 16, 24};
static const signed char MGMT_IE_OFF[16] = {4, -1, 10, -1, 0, 12, -1, -1, 12, -1, -1, -1, -1, -1, -1, -1};
/* values of output "part": the rows sniffsync.decode.dot11c finishes in Python */
enum { PART_NONE, PART_BA, PART_MGMT_BODY, PART_ASSOC };

static inline uint64_t mac(const unsigned char *p)
{
    uint64_t v = 0;
    for (int j = 0; j < 6; j++)
        v = v << 8 | p[j];
    return v;
}

#define SET(o, T, v) (((T *)out[o])[i] = (T)(v))

/* LLC/SNAP (AA AA 03, OUI 000000 or 0000F8, ethertype) at llc..llc_end: payload.decode_llc */
static void llc_snap(const unsigned char *buf, int64_t blen, int64_t llc, int64_t llc_end,
                     unsigned char **out, Py_ssize_t i)
{
    unsigned char w[8];
    int ok = llc + 8 <= llc_end;
    window(buf, blen, ok ? llc : 0, w, 8);     /* (a short one reads offset 0, as the Python does) */
    uint32_t oui = (uint32_t)w[3] << 16 | (uint32_t)w[4] << 8 | w[5];
    int snap = ok && w[0] == 0xAA && w[1] == 0xAA && w[2] == 0x03 && (oui == 0 || oui == 0xF8);
    SET(O_ETH, uint16_t, (uint32_t)w[6] << 8 | w[7]);
    SET(O_ETH_OK, unsigned char, snap);
    SET(O_L3, int64_t, snap ? llc + 8 : -1);
}

static void row(const unsigned char *buf, int64_t blen, int64_t off, int64_t end, int fcs_at_end,
                int cut, int roles, unsigned char **out, Py_ssize_t i)
{
    unsigned char w[WIN];
    window(buf, blen, off, w, WIN);
    int strip = fcs_at_end && !cut && end - off >= 4;
    int64_t body_end = end - 4 * strip, flen = body_end - off;
    unsigned fc0 = w[0], fc1 = w[1];
    int has_fc = flen >= 2, ftype = fc0 >> 2 & 3, sub = fc0 >> 4;
    int is_m = ftype == MGMT, is_c = ftype == CTRL, is_d = ftype == DATA, is_x = ftype == EXT;
    int not_x = has_fc && !is_x, wrap = is_c && sub == 7;
    int in_type = wrap ? w[10] >> 2 & 3 : ftype, in_sub = wrap ? w[10] >> 4 : sub;
    int in_ctrl = in_type == CTRL, shift = 6 * wrap, ds = fc1 & 3;
    int a4 = is_d && ds == 3, qos = is_d && (sub & 8), htc = (is_m || qos) && (fc1 & 0x80);
    int hdr = is_c ? CTRL_HDR_LEN[sub] : 24 + 6 * a4 + 2 * qos + 4 * htc;
    if (wrap && in_ctrl)
        hdr = 6 + CTRL_HDR_LEN[in_sub];
    if (is_x)
        hdr = 2;
    int is_short = flen < hdr;

    /* frame control, duration / AID */
    SET(O_TYPE, unsigned char, ftype);
    SET(O_SUB, unsigned char, sub);
    SET(O_TYPE_OK, unsigned char, flen >= 1);
    SET(O_TS, uint16_t, is_c && sub == 6 ? 0x160 + (fc1 & 0xF) : (unsigned)in_type << 4 | in_sub);
    SET(O_TS_OK, unsigned char, has_fc && (!wrap || flen >= 12));
    SET(O_FC1, unsigned char, fc1);
    SET(O_HAS_FC, unsigned char, has_fc);
    SET(O_NOT_X, unsigned char, not_x);
    SET(O_TO_DS, unsigned char, (fc1 & 1) != 0);
    SET(O_FROM_DS, unsigned char, (fc1 & 2) != 0);
    SET(O_RETRY, unsigned char, (fc1 & 8) != 0);
    SET(O_PROT, unsigned char, (fc1 & 0x40) != 0);
    SET(O_HTC, unsigned char, htc);
    SET(O_HTC_OK, unsigned char, has_fc && (is_m || is_d));
    unsigned dur = w[2] | (unsigned)w[3] << 8;
    int ps_poll = is_c && in_sub == 0xA && in_ctrl;
    SET(O_DUR, uint16_t, dur);
    SET(O_DUR_OK, unsigned char, not_x && flen >= 4 && !(dur & 0x8000) && !ps_poll);
    SET(O_AID, uint16_t, dur & 0x3FFF);
    SET(O_AID_OK, unsigned char, ps_poll && flen >= 4);

    /* addresses: RA, TA (a control wrapper's carried frame: its TA is address 3) */
    uint64_t a[5] = {0, mac(w + 4), mac(w + 10), mac(w + 16), mac(w + 24)};
    int has_ta = !is_c || (wrap ? in_ctrl && CTRL_HAS_TA[in_sub] : CTRL_HAS_TA[sub]);
    SET(O_RA, uint64_t, a[1]);
    SET(O_RA_OK, unsigned char, not_x && flen >= 10);
    SET(O_TA, uint64_t, wrap ? a[3] : a[2]);
    SET(O_TA_OK, unsigned char, not_x && has_ta && flen >= 16 + shift);
    if (roles) {
        int which[3] = {
            is_m ? 3 : is_d ? DS_BSSID[ds] : (is_c && !wrap) ? CTRL_BSSID_ADDR[sub] : 0,
            is_m ? 2 : is_d ? DS_SA[ds] : 0,
            is_m ? 1 : is_d ? DS_DA[ds] : 0,
        };
        for (int k = 0; k < 3; k++) {
            SET(O_BSSID + 2 * k, uint64_t, a[which[k]]);
            SET(O_BSSID_OK + 2 * k, unsigned char, has_fc && which[k] > 0 && flen >= ADDR_OFF[which[k]] + 6);
        }
    }

    /* sequence control, QoS control (TID, A-MSDU present) */
    unsigned sc = w[22] | (unsigned)w[23] << 8;
    SET(O_SEQ, uint16_t, sc >> 4);
    SET(O_FRAG, uint16_t, sc & 0xF);
    SET(O_SC_OK, unsigned char, has_fc && (is_m || is_d) && flen >= 24);
    unsigned qosv = a4 ? w[30] : w[24];
    int has_qos = has_fc && qos && flen >= 26 + 6 * a4;
    SET(O_AMSDU, unsigned char, (qosv & 0x80) != 0);
    SET(O_QOS_OK, unsigned char, has_qos);
    SET(O_TID, unsigned char, qosv & 0xF);

    SET(O_SHORT, unsigned char, is_short);
    SET(O_HDR, unsigned char, hdr);
    SET(O_IN_SUB, unsigned char, in_sub);
    SET(O_WRAP, unsigned char, wrap);
    SET(O_STRIP, unsigned char, strip);
    int part = PART_NONE;
    if (has_fc && in_ctrl && is_c && (in_sub == 8 || in_sub == 9))
        part = PART_BA;
    else if (has_fc && is_m && !is_short && MGMT_IE_OFF[sub] >= 0)
        part = PART_MGMT_BODY;
    else if (has_fc && is_m && !is_short && (sub == 1 || sub == 3))
        part = PART_ASSOC;
    SET(O_PART, unsigned char, part);
    if (strip) {                          /* the FCS as sent */
        unsigned char f[4];
        window(buf, blen, body_end, f, 4);
        SET(O_FCS, uint32_t, (uint32_t)f[0] | (uint32_t)f[1] << 8 | (uint32_t)f[2] << 16 | (uint32_t)f[3] << 24);
    }

    /* the LLC payload of a data frame (an A-MSDU's first subframe), then LLC/SNAP */
    int protected_ = (fc1 & 0x40) != 0;
    int64_t llc = -1, llc_end = -1;
    if (has_fc && is_d && !(sub & 4) && !protected_ && flen > hdr) {
        llc = off + hdr;
        llc_end = body_end;
        if (has_qos && (qosv & 0x80)) {   /* A-MSDU: skip DA, SA, length */
            unsigned char lb[2];
            window(buf, blen, llc + 12, lb, 2);
            int64_t sub_len = (int64_t)lb[0] << 8 | lb[1], new_off = llc + 14;
            int sub_ok = new_off <= body_end;
            llc_end = sub_ok ? (new_off + sub_len < body_end ? new_off + sub_len : body_end) : -1;
            llc = sub_ok ? new_off : -1;
        }
    }
    SET(O_LLC, int64_t, llc);
    SET(O_LLC_END, int64_t, llc_end);
    SET(O_L3, int64_t, -1);
    if (llc >= 0)
        llc_snap(buf, blen, llc, llc_end, out, i);
}

/* registered by _walk.c */
PyObject *walk_dot11(PyObject *self, PyObject *args)
{
    Py_buffer bv, ov, ev, fv, cv, outv[N_OUT];
    PyObject *outs, *result = NULL;
    int roles, got = 0;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*Op", &bv, &ov, &ev, &fv, &cv, &outs, &roles))
        return NULL;
    Py_ssize_t n = ov.len / (Py_ssize_t)sizeof(int64_t);
    unsigned char *out[N_OUT];
    if (ev.len != ov.len || fv.len != n || cv.len != n) {
        PyErr_SetString(PyExc_ValueError, "dot11: inputs differ in length");
        goto done;
    }
    /* the address roles' outputs are written only when asked for */
    if (take_outputs(outs, N_OUT, OUT_SIZE, n, roles ? N_OUT : FIRST_ROLE, "dot11", outv, out, &got) < 0)
        goto done;
    const int64_t *off = (const int64_t *)ov.buf, *end = (const int64_t *)ev.buf;
    const unsigned char *fcs = (const unsigned char *)fv.buf, *cut = (const unsigned char *)cv.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        prefetch_header((const unsigned char *)bv.buf, bv.len, off, i, n);
        row((const unsigned char *)bv.buf, (int64_t)bv.len, off[i], end[i], fcs[i] != 0, cut[i] != 0,
            roles, out, i);
    }
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    result = Py_None;
done:
    release_outputs(outv, got);
    PyBuffer_Release(&bv);
    PyBuffer_Release(&ov);
    PyBuffer_Release(&ev);
    PyBuffer_Release(&fv);
    PyBuffer_Release(&cv);
    return result;
}
