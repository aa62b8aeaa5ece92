/* What the C header passes (_l3.c, _dot11.c, _rtphy.c; the radiotap walk in _walk.c) share: their output columns taken
   from a Python list of writable buffers, bounded reads of header bytes, and the prefetch of
   headers a few rows ahead. */
#ifndef SNIFFSYNC_PASSES_H
#define SNIFFSYNC_PASSES_H
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define AHEAD 16        /* rows ahead whose header lines are fetched */

/* Each of the n_out items of `outs` a writable contiguous buffer of n * size[k] bytes (0
   bytes from `empty_from` on: outputs not asked for). 0 on success, else -1 with the Python
   error set; either way *held buffers of outv are held and must be released. */
static inline int take_outputs(PyObject *outs, int n_out, const unsigned char *size, Py_ssize_t n,
                        int empty_from, const char *who, Py_buffer *outv, unsigned char **out, int *held)
{
    *held = 0;
    if (!PyList_Check(outs) || PyList_GET_SIZE(outs) != n_out) {
        PyErr_Format(PyExc_ValueError, "%s: not the outputs' list", who);
        return -1;
    }
    for (int k = 0; k < n_out; k++) {
        if (PyObject_GetBuffer(PyList_GET_ITEM(outs, k), &outv[k], PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
            return -1;
        *held = k + 1;
        if (outv[k].len != (k >= empty_from ? 0 : n * (Py_ssize_t)size[k])) {
            PyErr_Format(PyExc_ValueError, "%s: output %d has the wrong size", who, k);
            return -1;
        }
        out[k] = (unsigned char *)outv[k].buf;
    }
    return 0;
}

/* k bytes at pos into dst, zero where outside the buffer (as bytecols.gather) */
static inline void window(const unsigned char *buf, int64_t blen, int64_t pos, unsigned char *dst, int k)
{
    if (pos >= 0 && pos + k <= blen) {
        memcpy(dst, buf + pos, (size_t)k);
        return;
    }
    for (int j = 0; j < k; j++)
        dst[j] = (pos + j >= 0 && pos + j < blen) ? buf[pos + j] : 0;
}

/* the `held` output buffers back (on every path out of a pass) */
static inline void release_outputs(Py_buffer *outv, int held)
{
    for (int k = 0; k < held; k++)
        PyBuffer_Release(&outv[k]);
}

/* rows are far apart in the file: fetch row i + AHEAD's header (two lines) now */
static inline void prefetch_header(const unsigned char *buf, Py_ssize_t len, const int64_t *off,
                                   Py_ssize_t i, Py_ssize_t n)
{
#if defined(__GNUC__) || defined(__clang__)
    if (i + AHEAD < n && off[i + AHEAD] >= 0 && off[i + AHEAD] + 64 < len) {
        __builtin_prefetch(buf + off[i + AHEAD]);
        __builtin_prefetch(buf + off[i + AHEAD] + 63);
    }
#else
    (void)buf; (void)len; (void)off; (void)i; (void)n;
#endif
}

#endif
