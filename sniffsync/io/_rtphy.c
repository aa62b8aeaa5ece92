/* sniffsync.io._walk.rt_phy: the PHY columns of radiotap's Rate, Channel, XChannel, MCS, VHT
 * and HE fields in one pass over the field bytes the radiotap pass copied out.
 *
 * What sniffsync.decode.radiotap_values computes vectorised (_phy_values: HE over VHT over
 * HT, each field's own columns only; _phy_kind; _ht_format; _he_format), row by row, with
 * the same values everywhere (also where a column is not valid: e.g. a reserved bandwidth
 * code's null entry -1 stored in the uint16 column as 65535, as numpy's assignment does).
 * The tests compare both on every test capture and on random headers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include "_passes.h"

/* the outputs, in the order sniffsync.decode.radiotap_values.PHY_OUTPUTS lists them */
enum {
    O_MCS, O_MCS_OK, O_NSS, O_NSS_OK, O_BW, O_BW_OK, O_GI, O_GI_OK, O_LDPC, O_LDPC_OK,
    O_STBC, O_STBC_OK, O_NESS, O_NESS_OK, O_LTF, O_LTF_OK, O_NLTF, O_NLTF_OK, O_PE, O_PE_OK,
    O_HEF, O_HEF_OK, O_PHY, O_HTF, O_HTF_OK, N_OUT
};
static const unsigned char OUT_SIZE[N_OUT] = {
    1, 1, 1, 1, 2, 1, 2, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 2, 2, 1,
};
/* inputs: the present bits of the fields read, and the fields' bytes per row */
enum { F_RATE, F_CHANNEL, F_XCHANNEL, F_MCS, F_VHT, F_HE, N_FIELD };
static const int FIELD_BIT[N_FIELD] = {2, 3, 18, 19, 21, 23};
static const int FIELD_SIZE[N_FIELD] = {1, 4, 8, 3, 12, 12};

#define NUL (-1)
/* sniffsync.decode.radiotap_values: PHY_NAMES codes and the lookup tables */
enum { PHY_DSSS, PHY_CCK, PHY_OFDM, PHY_HT, PHY_VHT, PHY_HE, PHY_UNKNOWN };
static const int16_t HT_BW[4] = {20, 40, 20, 20};
static const int16_t VHT_BW[32] = {20, 40, 20, 20, 80, 40, 40, 20, 20, 20, 20, 160, 80, 80, 40, 40, 40, 40,
                                   20, 20, 20, 20, 20, 20, 20, 20, NUL, NUL, NUL, NUL, NUL, NUL};
static const int16_t HE_BW[16] = {20, 40, 80, 160, NUL, NUL, NUL, NUL, NUL, NUL, NUL, NUL, NUL, NUL, NUL, NUL};
static const int16_t HE_GI[4] = {800, 1600, 3200, NUL};
static const int16_t HE_LTF_SIZE[4] = {NUL, 1, 2, 4};
static const int16_t HE_N_LTF[8] = {1, 2, 4, 6, 8, NUL, NUL, NUL};
static int16_t HT_NSS[128];
static signed char RATE_PHY[256] = {PHY_UNKNOWN, PHY_UNKNOWN, PHY_UNKNOWN};   /* filled by tables() */

static void tables(void)
{
    for (int m = 0; m < 128; m++)
        HT_NSS[m] = m < 32 ? m / 8 + 1 : m == 32 ? 1 : m < 39 ? 2 : m < 53 ? 3 : m < 77 ? 4 : NUL;
    memset(RATE_PHY, PHY_UNKNOWN, sizeof RATE_PHY);
    RATE_PHY[2] = RATE_PHY[4] = PHY_DSSS;
    RATE_PHY[11] = RATE_PHY[22] = PHY_CCK;
    static const int ofdm[8] = {12, 18, 24, 36, 48, 72, 96, 108};
    for (int k = 0; k < 8; k++)
        RATE_PHY[ofdm[k]] = PHY_OFDM;
}

static inline unsigned le16(const unsigned char *p) { return p[0] | (unsigned)p[1] << 8; }

#define SET(o, T, v) (((T *)out[o])[i] = (T)(v))
/* a value and its validity; a table's null entry makes it invalid (its -1 is still stored) */
#define PUT(o, T, v, ok) do { SET(o, T, v); SET(o##_OK, unsigned char, (ok)); } while (0)

static void ht(const unsigned char *r, unsigned char **out, Py_ssize_t i)
{
    unsigned known = r[0], flags = r[1], mcs = r[2];
    int16_t nss = HT_NSS[mcs & 0x7F];
    PUT(O_MCS, unsigned char, mcs, (known & 0x02) != 0);
    PUT(O_NSS, unsigned char, nss, (known & 0x02) && nss != NUL);
    PUT(O_BW, uint16_t, HT_BW[flags & 3], (known & 0x01) != 0);
    PUT(O_GI, uint16_t, flags & 0x04 ? 400 : 800, (known & 0x04) != 0);
    PUT(O_LDPC, unsigned char, (flags & 0x10) != 0, (known & 0x10) != 0);
    PUT(O_STBC, unsigned char, flags >> 5 & 3, (known & 0x20) != 0);
    PUT(O_NESS, unsigned char, (flags >> 7 & 1) | (known >> 7 & 1) << 1, (known & 0x40) != 0);
}

static void vht(const unsigned char *r, unsigned char **out, Py_ssize_t i)
{
    unsigned known = le16(r), flags = r[2], mcs_nss = r[4];
    int user0 = (mcs_nss & 0x0F) != 0;
    int16_t bw = VHT_BW[r[3] & 0x1F];
    PUT(O_MCS, unsigned char, mcs_nss >> 4, user0);
    PUT(O_NSS, unsigned char, mcs_nss & 0x0F, user0);
    PUT(O_BW, uint16_t, bw, (known & 0x0040) && bw != NUL);
    PUT(O_GI, uint16_t, flags & 0x04 ? 400 : 800, (known & 0x0004) != 0);
    PUT(O_LDPC, unsigned char, (r[8] & 0x01) != 0, user0);
    PUT(O_STBC, unsigned char, flags & 0x01, (known & 0x0001) != 0);
}

static void he(const unsigned char *r, unsigned char **out, Py_ssize_t i)
{
    unsigned d1 = le16(r), d2 = le16(r + 2), d3 = le16(r + 4), d5 = le16(r + 8), d6 = le16(r + 10);
    int stbc = (d3 & 0x8000) && (d1 & 0x0200);
    unsigned nsts = d6 & 0x0F, nss = stbc ? nsts / 2 : nsts;   /* with STBC two streams each */
    int16_t bw = HE_BW[d5 & 0x0F], gi = HE_GI[d5 >> 4 & 3], ltf = HE_LTF_SIZE[d5 >> 6 & 3],
            nltf = HE_N_LTF[d5 >> 8 & 7];
    PUT(O_MCS, unsigned char, d3 >> 8 & 0x0F, (d1 & 0x0020) != 0);
    PUT(O_NSS, unsigned char, nss, nss > 0);
    PUT(O_BW, uint16_t, bw, (d1 & 0x4000) && bw != NUL);
    PUT(O_GI, uint16_t, gi, (d2 & 0x0002) && gi != NUL);
    PUT(O_LDPC, unsigned char, (d3 & 0x2000) != 0, (d1 & 0x0080) != 0);
    PUT(O_STBC, unsigned char, stbc, (d1 & 0x0200) != 0);
    PUT(O_LTF, unsigned char, ltf, ltf != NUL);
    PUT(O_NLTF, unsigned char, nltf, (d2 & 0x0004) && nltf != NUL);
    PUT(O_PE, unsigned char, (d5 & 0x8000) != 0, (d2 & 0x0020) != 0);
    PUT(O_HEF, signed char, d1 & 3, 1);
}

static void phy_row(const uint32_t present, const unsigned char **f, unsigned char **out, Py_ssize_t i)
{
    int has[N_FIELD];
    for (int k = 0; k < N_FIELD; k++)
        has[k] = f[k] != NULL && (present >> FIELD_BIT[k] & 1);
    /* the PHY: HE / VHT / HT by field, else the legacy rate, else the channel flags */
    int phy = has[F_RATE] ? RATE_PHY[f[F_RATE][i]] : PHY_UNKNOWN;
    int ch = has[F_CHANNEL], xch = has[F_XCHANNEL] && !ch;
    unsigned cflags = ch ? le16(f[F_CHANNEL] + 4 * i + 2) : xch ? le16(f[F_XCHANNEL] + 8 * i) : 0;
    if (phy == PHY_UNKNOWN && (ch || xch))
        phy = cflags & 0x40 ? PHY_OFDM : cflags & 0x20 ? PHY_CCK : PHY_UNKNOWN;
    if (has[F_MCS]) {
        phy = PHY_HT;
        ht(f[F_MCS] + 3 * i, out, i);
    }
    if (has[F_VHT]) {
        phy = PHY_VHT;
        vht(f[F_VHT] + 12 * i, out, i);
    }
    if (has[F_HE]) {
        phy = PHY_HE;
        he(f[F_HE] + 12 * i, out, i);
    }
    SET(O_PHY, int16_t, phy);
    int htf = has[F_MCS] && !has[F_VHT] && !has[F_HE] && (f[F_MCS][3 * i] & 0x08);
    SET(O_HTF, int16_t, htf ? f[F_MCS][3 * i + 1] >> 3 & 1 : -1);
    SET(O_HTF_OK, unsigned char, htf);
}

/* registered by _walk.c */
PyObject *walk_rt_phy(PyObject *self, PyObject *args)
{
    Py_buffer pv, fv[N_FIELD], outv[N_OUT];
    PyObject *outs, *result = NULL;
    int got_f = 0, got = 0;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*O", &pv, &fv[0], &fv[1], &fv[2], &fv[3], &fv[4], &fv[5], &outs))
        return NULL;
    got_f = N_FIELD;
    Py_ssize_t n = pv.len / (Py_ssize_t)sizeof(uint32_t);
    const unsigned char *f[N_FIELD];
    unsigned char *out[N_OUT];
    for (int k = 0; k < N_FIELD; k++) {   /* a field not read: no bytes (never present) */
        if (fv[k].len != 0 && fv[k].len != n * FIELD_SIZE[k]) {
            PyErr_Format(PyExc_ValueError, "rt_phy: field %d has the wrong size", k);
            goto done;
        }
        f[k] = fv[k].len ? (const unsigned char *)fv[k].buf : NULL;
    }
    if (take_outputs(outs, N_OUT, OUT_SIZE, n, N_OUT, "rt_phy", outv, out, &got) < 0)
        goto done;
    if (RATE_PHY[2] != PHY_DSSS)          /* (set up once, under the GIL) */
        tables();
    const uint32_t *present = (const uint32_t *)pv.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++)
        phy_row(present[i], f, out, i);
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    result = Py_None;
done:
    release_outputs(outv, got);
    for (int k = 0; k < got_f; k++)
        PyBuffer_Release(&fv[k]);
    PyBuffer_Release(&pv);
    return result;
}
