/* sniffsync.io._walk.l3: IPv4 / IPv6, TCP, UDP and ICMP headers of a chunk in one pass.
 *
 * What sniffsync.decode.payload._decode_l3 computes vectorised, row by row: the IPv6
 * extension chain (8 headers at most), the TCP option walk (40 positions at most, the
 * last MSS / window scale / timestamps option wins, the first well-formed SACK option's
 * offset), the validity of every field and the two marks. Bytes past the buffer read as
 * zero, as sniffsync.io.bytecols.gather reads them. Values of rows where a field is not
 * valid are zero (the Python decoder leaves whatever its window held there). Address
 * texts, categories and the SACK text stay in Python. The tests compare both decoders'
 * valid values, masks and marks on every test capture and on random headers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include "_passes.h"

/* the outputs, in the order sniffsync.decode.l3c.OUTPUTS lists them, and their item sizes */
enum {
    O_PROTO, O_IPLEN, O_IPID, O_V4OK, O_V6OK, O_SRC4, O_DST4, O_ADDR6,
    O_SPORT, O_DPORT, O_PORTS_OK, O_SEQ, O_SEQ_OK, O_ACK, O_ACK_OK, O_FLAGS, O_FLAGS_OK,
    O_WIN, O_WIN_OK, O_PLEN, O_PLEN_OK, O_ULEN, O_UDP_OK, O_MSS, O_MSS_OK, O_WS, O_WS_OK,
    O_TSVAL, O_TSECR, O_TS_OK, O_SACK, O_TCP_OK, O_SACK_AT, O_UW0, O_UW1, O_UW2,
    O_UW0_OK, O_UW1_OK, O_UW2_OK, O_ICMP_TYPE, O_ICMP_CODE, O_ICMP_OK, O_ICMP_ID, O_ICMP_SEQ,
    O_ECHO_OK, O_IP_BAD, O_L4_BAD, O_FIXED, N_OUT
};
static const unsigned char OUT_SIZE[N_OUT] = {
    1, 4, 2, 1, 1, 4, 4, 32,
    2, 2, 1, 4, 1, 4, 1, 2, 1,
    2, 1, 4, 1, 2, 1, 2, 1, 1, 1,
    4, 4, 1, 1, 1, 8, 4, 4, 4,
    1, 1, 1, 1, 1, 1, 2, 2,
    1, 1, 1, 1,
};

#define WIN 64

static inline uint32_t be16(const unsigned char *p) { return ((uint32_t)p[0] << 8) | p[1]; }
static inline uint32_t be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

#define SET(o, T, v) (((T *)out[o])[i] = (T)(v))

/* The TCP options from l4 + 20 to opt_end (the header's end, or the capture's) */
static void tcp_options(const unsigned char *buf, int64_t blen, int64_t pos, int64_t opt_end,
                        unsigned char **out, Py_ssize_t i)
{
    int got_mss = 0, got_ws = 0, got_ts = 0, sack = 0;
    uint32_t mss = 0, ws = 0, tsval = 0, tsecr = 0;
    int64_t sack_at = -1;
    unsigned char ob[10];
    for (int step = 0; step < 40 && pos < opt_end; step++) {
        window(buf, blen, pos, ob, 10);
        int kind = ob[0];
        int64_t olen = ob[1];
        if (kind == 0 || (kind != 1 && (olen < 2 || pos + 2 > opt_end)))
            break;
        int inside = pos + olen <= opt_end;
        if (kind == 2 && olen == 4 && inside) {
            got_mss = 1;
            mss = be16(ob + 2);
        } else if (kind == 3 && olen == 3 && inside) {
            got_ws = 1;
            ws = ob[2];
        } else if (kind == 8 && olen == 10 && inside) {
            got_ts = 1;
            tsval = be32(ob + 2);
            tsecr = be32(ob + 6);
        } else if (kind == 5) {
            sack = 1;
            if (inside && sack_at < 0 && (olen == 10 || olen == 18 || olen == 26 || olen == 34))
                sack_at = pos;
        }
        pos += kind == 1 ? 1 : olen;
    }
    SET(O_MSS, uint16_t, mss);
    SET(O_MSS_OK, unsigned char, got_mss);
    SET(O_WS, unsigned char, ws);
    SET(O_WS_OK, unsigned char, got_ws);
    SET(O_TSVAL, uint32_t, tsval);
    SET(O_TSECR, uint32_t, tsecr);
    SET(O_TS_OK, unsigned char, got_ts);
    SET(O_SACK, unsigned char, sack);
    SET(O_SACK_AT, int64_t, sack_at);
}

static const unsigned char TS_ONLY[4] = {1, 1, 8, 10};

/* TCP / UDP / ICMP above the IP header of row i (l4 = where it starts) */
static void layer4(const unsigned char *buf, int64_t blen, int64_t l4, int64_t end, int64_t l4_len,
                   int proto, int icmp, unsigned char **out, Py_ssize_t i)
{
    unsigned char w[WIN];
    int64_t cap = end - l4;
    int tcp = proto == 6, udp = proto == 17;
    window(buf, blen, l4, w, 40);
    if (tcp || udp) {
        if (cap >= 4) {
            SET(O_SPORT, uint16_t, be16(w));
            SET(O_DPORT, uint16_t, be16(w + 2));
            SET(O_PORTS_OK, unsigned char, 1);
        }
        if ((tcp && cap < 20) || (udp && cap < 8))
            SET(O_L4_BAD, unsigned char, 1);
    }
    if (tcp) {
        int64_t thl = (int64_t)(w[12] >> 4) * 4;
        if (cap >= 8) { SET(O_SEQ, uint32_t, be32(w + 4)); SET(O_SEQ_OK, unsigned char, 1); }
        if (cap >= 12) { SET(O_ACK, uint32_t, be32(w + 8)); SET(O_ACK_OK, unsigned char, 1); }
        if (cap >= 14) {
            SET(O_FLAGS, uint16_t, ((uint32_t)(w[12] & 1) << 8) | w[13]);
            SET(O_FLAGS_OK, unsigned char, 1);
        }
        if (cap >= 16) { SET(O_WIN, uint16_t, be16(w + 14)); SET(O_WIN_OK, unsigned char, 1); }
        if (cap >= 13 && thl >= 20) {
            SET(O_PLEN, int32_t, (int32_t)(uint32_t)(uint64_t)(l4_len - thl));
            SET(O_PLEN_OK, unsigned char, 1);
        }
        if (cap >= 20) {
            SET(O_TCP_OK, unsigned char, 1);
            if (thl == 32 && cap >= 32 && memcmp(w + 20, TS_ONLY, 4) == 0) {
                SET(O_TSVAL, uint32_t, be32(w + 24));
                SET(O_TSECR, uint32_t, be32(w + 28));
                SET(O_TS_OK, unsigned char, 1);
            } else if (thl > 20) {
                tcp_options(buf, blen, l4 + 20, l4 + thl < end ? l4 + thl : end, out, i);
            }
        }
    } else if (udp && cap >= 8) {
        uint32_t ulen = be16(w + 4);
        SET(O_ULEN, uint16_t, ulen);
        SET(O_UDP_OK, unsigned char, 1);
        for (int k = 0; k < 3; k++) {
            int at = 8 + 4 * k;
            if (cap >= at + 4 && ulen >= (uint32_t)at + 4) {
                SET(O_UW0 + k, uint32_t, be32(w + at));
                SET(O_UW0_OK + k, unsigned char, 1);
            }
        }
    } else if (icmp && cap >= 2) {
        SET(O_ICMP_TYPE, unsigned char, w[0]);
        SET(O_ICMP_CODE, unsigned char, w[1]);
        SET(O_ICMP_OK, unsigned char, 1);
        if (cap >= 8 && (w[0] == 0 || w[0] == 8 || w[0] == 128 || w[0] == 129)) {
            SET(O_ICMP_ID, uint16_t, be16(w + 4));
            SET(O_ICMP_SEQ, uint16_t, be16(w + 6));
            SET(O_ECHO_OK, unsigned char, 1);
        }
    }
}

/* IPv6: the extension headers skipped (hop-by-hop, routing, destination options, fragment) */
static void ipv6_chain(const unsigned char *buf, int64_t blen, int64_t end, int *nh, int64_t *p, int *first)
{
    unsigned char hb[4];
    for (int k = 0; k < 8; k++) {
        int frag = *nh == 44;
        if (!(*nh == 0 || *nh == 43 || *nh == 60 || frag) || *p + 8 > end)
            return;
        window(buf, blen, *p, hb, 4);
        if (frag && (be16(hb + 2) >> 3) != 0)
            *first = 0;
        *nh = hb[0];
        *p += frag ? 8 : ((int64_t)hb[1] + 1) * 8;
    }
}

static void row(const unsigned char *buf, int64_t blen, int64_t off, int64_t end, int etype,
                unsigned char **out, Py_ssize_t i)
{
    unsigned char w[WIN];
    if (off < 0)
        return;
    window(buf, blen, off, w, 52);
    int64_t caplen = end - off;
    int ver = w[0] >> 4;
    int v4 = etype == 0x0800 && ver == 4, v6 = etype == 0x86DD && ver == 6;
    int64_t ihl = (int64_t)(w[0] & 0xF) * 4;
    int v4_ok = v4 && caplen >= 20 && ihl >= 20, v6_ok = v6 && caplen >= 40;
    if ((v4 && !v4_ok) || (v6 && !v6_ok))
        SET(O_IP_BAD, unsigned char, 1);
    if (!v4_ok && !v6_ok)
        return;
    /* IPv4 without options, first fragment, TCP with NOP NOP TS: payload._fixed_layout */
    SET(O_FIXED, unsigned char, v4_ok && caplen >= 52 && w[0] == 0x45 && w[9] == 6 && (w[6] & 0x1F) == 0
        && w[7] == 0 && (w[32] >> 4) == 8 && memcmp(w + 40, TS_ONLY, 4) == 0);
    int proto, first = 1;
    int64_t ip_len, l4;
    if (v4_ok) {
        proto = w[9];
        ip_len = be16(w + 2);
        l4 = off + ihl;
        first = (be16(w + 6) & 0x1FFF) == 0;
        SET(O_V4OK, unsigned char, 1);
        SET(O_IPID, uint16_t, be16(w + 4));
        SET(O_SRC4, uint32_t, be32(w + 12));
        SET(O_DST4, uint32_t, be32(w + 16));
    } else {
        proto = w[6];
        ip_len = (int64_t)be16(w + 4) + 40;
        l4 = off + 40;
        SET(O_V6OK, unsigned char, 1);
        memcpy(out[O_ADDR6] + 32 * i, w + 8, 32);
        ipv6_chain(buf, blen, end, &proto, &l4, &first);
    }
    SET(O_PROTO, unsigned char, proto);
    SET(O_IPLEN, uint32_t, ip_len);
    if (first && l4 < end)
        layer4(buf, blen, l4, end, ip_len - (l4 - off), proto,
               (v4_ok && proto == 1) || (v6_ok && proto == 58), out, i);
}

/* registered by _walk.c (one extension, four sources) */
PyObject *walk_l3(PyObject *self, PyObject *args)
{
    Py_buffer bv, ov, ev, tv, outv[N_OUT];
    PyObject *outs, *result = NULL;
    int got = 0;
    if (!PyArg_ParseTuple(args, "y*y*y*y*O", &bv, &ov, &ev, &tv, &outs))
        return NULL;
    Py_ssize_t n = ov.len / (Py_ssize_t)sizeof(int64_t);
    unsigned char *out[N_OUT];
    if (ev.len != ov.len || tv.len != n * (Py_ssize_t)sizeof(uint16_t)) {
        PyErr_SetString(PyExc_ValueError, "l3: inputs differ in length");
        goto done;
    }
    if (take_outputs(outs, N_OUT, OUT_SIZE, n, N_OUT, "l3", outv, out, &got) < 0)
        goto done;
    const int64_t *off = (const int64_t *)ov.buf, *end = (const int64_t *)ev.buf;
    const uint16_t *etype = (const uint16_t *)tv.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        prefetch_header((const unsigned char *)bv.buf, bv.len, off, i, n);
        row((const unsigned char *)bv.buf, (int64_t)bv.len, off[i], end[i], etype[i], out, i);
    }
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    result = Py_None;
done:
    release_outputs(outv, got);
    PyBuffer_Release(&bv);
    PyBuffer_Release(&ov);
    PyBuffer_Release(&ev);
    PyBuffer_Release(&tv);
    return result;
}
