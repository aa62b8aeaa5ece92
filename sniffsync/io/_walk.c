/* sniffsync.io._walk: the record walk of pcap / pcapng at C speed.
 *
 * The one per-record loop of the reader (a record's position depends on the previous
 * record's length) as sniffsync.io.walk's pure-Python walks do it, with the same results
 * (offsets, and where the walk stopped), including their 4-record steps between bounds
 * tests. Every read is bounds-checked against the buffer; nothing else is interpreted
 * here (lengths are checked vectorised by the callers). The GIL is released while walking.
 * As each step's load depends on the previous one, the walk is bound by memory latency; the
 * lines ahead of it are prefetched (about 4x faster on a capture not in the CPU caches).
 * Only the CPython C API and the buffer protocol: no numpy headers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include "_passes.h"

/* u32 at p, in the buffer's byte order */
static inline uint32_t load_u32(const unsigned char *p, int big)
{
    if (big)
        return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
    return ((uint32_t)p[3] << 24) | ((uint32_t)p[2] << 16) | ((uint32_t)p[1] << 8) | p[0];
}

#define PREFETCH 4096    /* bytes ahead of the walk to prefetch */
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH_LINE(p) __builtin_prefetch(p)
#else
#define PREFETCH_LINE(p) ((void)0)
#endif

typedef struct {
    int64_t *v;
    Py_ssize_t n, cap;
} offs_t;

static int push(offs_t *o, int64_t x)
{
    if (o->n == o->cap) {
        Py_ssize_t cap = o->cap ? o->cap * 2 : 4096;
        int64_t *v = realloc(o->v, (size_t)cap * sizeof(int64_t));
        if (!v)
            return -1;
        o->v = v;
        o->cap = cap;
    }
    o->v[o->n++] = x;
    return 0;
}

/* Offsets from pos while pos <= stop (tested every 4 records), stepping by the u32 at
 * pos + at plus `add` (a zero length steps `zero` bytes). Stops before a record whose
 * length field the buffer cannot hold. Returns 0, or -1 when out of memory. */
static int walk(const unsigned char *buf, int64_t n, int64_t *ppos, int64_t stop, int at,
                int64_t add, int64_t zero, int big, offs_t *o)
{
    int64_t pos = *ppos, ahead = pos;
    while (pos <= stop) {
        for (int k = 0; k < 4; k++) {
            if (pos < 0 || pos > n - at - 4) {
                *ppos = pos;
                return 0;
            }
            /* each step's load depends on the previous one: stream the lines ahead into
               the cache (a hint only: never faults, nothing is read past the buffer) */
            if (ahead < pos)
                ahead = pos;
            for (; ahead < pos + PREFETCH && ahead < n; ahead += 64)
                PREFETCH_LINE(buf + ahead);
            if (push(o, pos) < 0)
                return -1;
            uint32_t len = load_u32(buf + pos + at, big);
            pos += (len == 0 && zero) ? zero : (int64_t)len + add;
        }
    }
    *ppos = pos;
    return 0;
}

/* The walk; with `heads`, also the first `heads` bytes at each offset (zero past the buffer,
 * as bytecols.gather reads them), copied while the walk's lines are still cached. */
static PyObject *run(PyObject *args, int at, int64_t add, int64_t zero, int heads)
{
    Py_buffer view;
    long long pos, stop;
    int big;
    if (!PyArg_ParseTuple(args, "y*LLp", &view, &pos, &stop, &big))
        return NULL;
    offs_t o = {NULL, 0, 0};
    int64_t p = pos;
    int rc;
    PyObject *head_b = NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = walk((const unsigned char *)view.buf, (int64_t)view.len, &p, stop, at, add, zero, big, &o);
    Py_END_ALLOW_THREADS
    if (rc == 0 && heads) {
        head_b = PyBytes_FromStringAndSize(NULL, o.n * (Py_ssize_t)heads);
        if (!head_b)
            rc = -1;
    }
    if (head_b) {
        unsigned char *h = (unsigned char *)PyBytes_AS_STRING(head_b);
        const unsigned char *buf = (const unsigned char *)view.buf;
        int64_t blen = (int64_t)view.len;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < o.n; i++) {
            int64_t q = o.v[i], have = blen - q < heads ? blen - q : heads;   /* (walked: 0 <= q < blen) */
            memcpy(h + i * heads, buf + q, (size_t)have);
            memset(h + i * heads + have, 0, (size_t)(heads - have));
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    if (rc < 0) {
        free(o.v);
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)o.v, o.n * (Py_ssize_t)sizeof(int64_t));
    free(o.v);
    if (!bytes) {
        Py_XDECREF(head_b);
        return NULL;
    }
    if (heads)
        return Py_BuildValue("NNL", bytes, head_b, (long long)p);
    return Py_BuildValue("NL", bytes, (long long)p);
}

PyDoc_STRVAR(pcap_doc,
"pcap(buf, pos, stop, big) -> (offsets, pos)\n\n"
"Classic pcap record offsets from pos while pos <= stop (tested every 4 records), as\n"
"native int64 bytes, and the next position: each record is 16 header bytes plus its\n"
"incl_len (u32 at +8). Stops before a record whose incl_len the buffer cannot hold.");

static PyObject *walk_pcap(PyObject *self, PyObject *args)
{
    return run(args, 8, 16, 0, 0);
}

PyDoc_STRVAR(pcap_heads_doc,
"pcap_heads(buf, pos, stop, big) -> (offsets, headers, pos)\n\n"
"pcap(), and the 16 header bytes of each record (zero past the end of buf).");

static PyObject *walk_pcap_heads(PyObject *self, PyObject *args)
{
    return run(args, 8, 16, 0, 16);
}

PyDoc_STRVAR(pcapng_doc,
"pcapng(buf, pos, stop, big) -> (offsets, pos)\n\n"
"pcapng block offsets as pcap() does, stepping by each block's total length (u32 at +4;\n"
"a zero length steps 12 bytes so the walk always moves).");

static PyObject *walk_pcapng(PyObject *self, PyObject *args)
{
    return run(args, 4, 0, 12, 0);
}

/* ---- radiotap: the fixed fields of every frame's header in one pass ----
 *
 * What sniffsync.decode.radiotap does vectorised (version, it_len, the present-word chain,
 * each field aligned relative to the header's start, namespaces, first occurrence wins,
 * a TLV or an undefined field ends the walk), for the frames of a clean chunk: any frame
 * the Python decoder would mark (corrupt header, a field or vendor namespace beyond
 * it_len) or anything unusual makes the whole call answer None, and the caller decodes
 * the chunk in Python. So this never decides a mark, and what it returns is what the
 * Python decoder computes (the tests compare every column on every test capture). */

static const unsigned char RT_ALIGN[28] = {8, 1, 1, 2, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 2, 2, 1, 1, 4, 1,
                                           4, 2, 8, 2, 2, 2, 1, 2};
static const unsigned char RT_SIZE[28] = {8, 1, 1, 4, 2, 1, 1, 2, 2, 2, 1, 1, 1, 1, 2, 2, 1, 1, 8, 3,
                                          8, 12, 12, 12, 12, 6, 1, 4};
#define RT_TLV 28
#define RT_MAX_WORDS 32

static inline uint32_t le32(const unsigned char *p) { return load_u32(p, 0); }
static inline int64_t align_up(int64_t pos, int64_t a) { return (pos + (a - 1)) & ~(a - 1); }

/* One frame: returns 0 (clean: *present and the wanted fields' bytes set) or 1 (the
 * Python decoder would mark it, or it is unusual). */
static int rt_frame(const unsigned char *buf, int64_t blen, int64_t o, int64_t e, uint32_t need,
                    unsigned char **dst, int64_t i, int64_t *it_len_out, uint32_t *present)
{
    if (o < 0 || e > blen || e - o < 8)
        return 1;
    const unsigned char *h = buf + o;
    int64_t it_len = (int64_t)h[2] | ((int64_t)h[3] << 8);
    if (h[0] != 0 || it_len < 8 || it_len > e - o)
        return 1;
    uint32_t words[RT_MAX_WORDS];
    int n_words = 1;
    words[0] = le32(h + 4);
    while (words[n_words - 1] >> 31 & 1) {
        int64_t at = 4 + 4 * (int64_t)n_words;
        if (n_words >= RT_MAX_WORDS || at + 4 > it_len)
            return 1;
        words[n_words++] = le32(h + at);
    }
    int64_t pos = 4 + 4 * (int64_t)n_words;
    int in_rt = 1, base = 0;
    uint32_t seen = 0, got = 0;
    for (int k = 0; k < n_words; k++) {
        uint32_t w = words[k];
        if (in_rt) {
            for (int b = 0; b <= RT_TLV; b++) {
                if (!(w >> b & 1))
                    continue;
                int bit = base + b;
                if (bit >= RT_TLV)            /* TLVs, or a field of unknown size: stop */
                    goto done;
                int64_t size = RT_SIZE[bit];
                pos = align_up(pos, RT_ALIGN[bit]);
                if (seen >> bit & 1) {        /* first occurrence wins */
                    pos += size;
                    continue;
                }
                seen |= 1u << bit;
                if (pos + size > it_len)
                    return 1;
                if (need >> bit & 1) {
                    memcpy(dst[bit] + i * size, h + pos, (size_t)size);
                    got |= 1u << bit;
                }
                pos += size;
            }
        }
        if (w >> 29 & 1) {                    /* radiotap namespace for the next word */
            in_rt = 1;
            base = 0;
        } else if (w >> 30 & 1) {             /* vendor namespace: skip its data */
            pos = align_up(pos, 2);
            if (pos + 6 > it_len)
                return 1;
            pos += 6 + ((int64_t)h[pos + 4] | ((int64_t)h[pos + 5] << 8));
            in_rt = 0;
        } else if (in_rt) {
            base += 32;
        }
    }
done:
    *it_len_out = it_len;
    *present = got;
    return 0;
}

PyDoc_STRVAR(radiotap_doc,
"radiotap(buf, off, end, need) -> None or (it_len, present, fields)\n\n"
"The radiotap headers at the int64 offsets off (frame ends in end, both native int64\n"
"buffers) of buf: it_len (native int64 bytes), present (native uint32 bytes: bit b set\n"
"where field b was read) and, per bit b of need (ascending), the field's bytes of every\n"
"frame (n x its size; zeros where absent). None when any frame needs the Python decoder.");

static PyObject *radiotap(PyObject *self, PyObject *args)
{
    Py_buffer bv, ov, ev;
    unsigned long need_l;
    if (!PyArg_ParseTuple(args, "y*y*y*k", &bv, &ov, &ev, &need_l))
        return NULL;
    PyObject *result = NULL, *it_b = NULL, *pr_b = NULL, *fields = NULL;
    uint32_t need = (uint32_t)need_l & ((1u << RT_TLV) - 1);
    Py_ssize_t n = ov.len / (Py_ssize_t)sizeof(int64_t);
    if (ev.len != ov.len) {
        PyErr_SetString(PyExc_ValueError, "off and end differ in length");
        goto out;
    }
    unsigned char *dst[RT_TLV] = {NULL};
    it_b = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    pr_b = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(uint32_t));
    fields = PyList_New(0);
    if (!it_b || !pr_b || !fields)
        goto out;
    for (int b = 0; b < RT_TLV; b++) {
        if (!(need >> b & 1))
            continue;
        PyObject *f = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)RT_SIZE[b]);
        if (!f || PyList_Append(fields, f) < 0) {
            Py_XDECREF(f);
            goto out;
        }
        Py_DECREF(f);
        dst[b] = (unsigned char *)PyBytes_AS_STRING(f);
        memset(dst[b], 0, (size_t)(n * RT_SIZE[b]));
    }
    const int64_t *off = (const int64_t *)ov.buf, *end = (const int64_t *)ev.buf;
    int64_t *it_len = (int64_t *)PyBytes_AS_STRING(it_b);
    uint32_t *present = (uint32_t *)PyBytes_AS_STRING(pr_b);
    int unusual = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && !unusual; i++) {
        prefetch_header((const unsigned char *)bv.buf, bv.len, off, i, n);
        unusual = rt_frame((const unsigned char *)bv.buf, (int64_t)bv.len, off[i], end[i], need, dst, i,
                           it_len + i, present + i);
    }
    Py_END_ALLOW_THREADS
    if (unusual) {
        Py_INCREF(Py_None);
        result = Py_None;
    } else {
        result = Py_BuildValue("OOO", it_b, pr_b, fields);
    }
out:
    Py_XDECREF(it_b);
    Py_XDECREF(pr_b);
    Py_XDECREF(fields);
    PyBuffer_Release(&bv);
    PyBuffer_Release(&ov);
    PyBuffer_Release(&ev);
    return result;
}

/* sniffsync/io/_l3.c, sniffsync/io/_dot11.c */
PyObject *walk_l3(PyObject *self, PyObject *args);
PyObject *walk_dot11(PyObject *self, PyObject *args);
PyObject *walk_rt_phy(PyObject *self, PyObject *args);    /* sniffsync/io/_rtphy.c */
PyObject *copy_pieces(PyObject *self, PyObject *args);    /* sniffsync/io/_pieces.c */

PyDoc_STRVAR(l3_doc,
"l3(buf, off, end, ethertype, outs) -> None\n\n"
"The IP / TCP / UDP / ICMP fields of the rows at the int64 offsets off (ends in end,\n"
"ethertype uint16) written into the list of writable buffers outs (n items each, in the\n"
"order of sniffsync.decode.l3c.OUTPUTS; zeroed by the caller, the SACK offsets -1).");

PyDoc_STRVAR(dot11_doc,
"dot11(buf, off, end, fcs_at_end, truncated, outs, roles) -> None\n\n"
"The 802.11 MAC header and LLC/SNAP fields of the frames at the int64 offsets off (ends in\n"
"end, fcs_at_end and truncated uint8) written into the list of writable buffers outs (in\n"
"the order of sniffsync.decode.dot11c.OUTPUTS, zeroed by the caller; the address roles'\n"
"outputs empty unless roles).");

PyDoc_STRVAR(rt_phy_doc,
"rt_phy(present, rate, channel, xchannel, mcs, vht, he, outs) -> None\n\n"
"The PHY columns of the radiotap field bytes radiotap() copied out (present: its uint32 bits\n"
"per row; a field not read: b\"\") written into the list of writable buffers outs (in the order\n"
"of sniffsync.decode.radiotap_values.PHY_OUTPUTS, zeroed by the caller).");

PyDoc_STRVAR(pieces_doc,
"pieces(out, dst, src, src_off, len) -> None\n\n"
"out[dst[i]:dst[i] + len[i]] = src[src_off[i]:src_off[i] + len[i]] for every i (dst, src_off,\n"
"len: native int64 buffers of one size; out writable; one memmove each). Every range is\n"
"checked first: one outside a buffer raises ValueError and nothing is copied.");

static PyMethodDef methods[] = {
    {"pcap", walk_pcap, METH_VARARGS, pcap_doc},
    {"pcap_heads", walk_pcap_heads, METH_VARARGS, pcap_heads_doc},
    {"pcapng", walk_pcapng, METH_VARARGS, pcapng_doc},
    {"radiotap", radiotap, METH_VARARGS, radiotap_doc},
    {"l3", walk_l3, METH_VARARGS, l3_doc},
    {"dot11", walk_dot11, METH_VARARGS, dot11_doc},
    {"rt_phy", walk_rt_phy, METH_VARARGS, rt_phy_doc},
    {"pieces", copy_pieces, METH_VARARGS, pieces_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_walk",
    "Record walk of pcap / pcapng, radiotap, 802.11 MAC / LLC and IP / TCP / UDP headers at C speed "
    "(see sniffsync.io.walk).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__walk(void)
{
    return PyModule_Create(&module);
}
