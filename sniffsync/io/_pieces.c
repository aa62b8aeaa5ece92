/* sniffsync.io._walk.pieces: byte ranges copied from one buffer into another, one memmove each.
 *
 * The pcapng writer (sniffsync.sync.pcapng) copies every packet's bytes from its input's map
 * into the output. numpy does that as a gather into a temporary and a scatter out of it, one
 * run of equal lengths at a time: twice the memory traffic and a fresh temporary per run. Here
 * each piece goes straight from source to destination. Every range is checked against both
 * buffers before anything is copied (a bad one raises ValueError, nothing written); the GIL
 * is released while copying (the caller does not change the offsets meanwhile). Only the
 * CPython C API and the buffer protocol.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* the buffer format of a native int64 ("q" or "l" of 8 bytes, native byte order) */
static int native_int64(const Py_buffer *v)
{
    const char *f = v->format ? v->format : "B";
    const uint16_t one = 1;
    int little = *(const unsigned char *)&one;
    if (*f == '@' || *f == '=' || (*f == '<' && little) || (*f == '>' && !little))
        f++;
    return v->itemsize == 8 && (!strcmp(f, "q") || !strcmp(f, "l"));
}

/* an int64 buffer (of exactly n items when n >= 0), or -1 with the error set */
static int int64s(PyObject *obj, Py_buffer *v, Py_ssize_t n, const char *what)
{
    if (PyObject_GetBuffer(obj, v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    if (!native_int64(v) || (n >= 0 && v->len != n * 8)) {
        PyBuffer_Release(v);
        if (n >= 0)
            PyErr_Format(PyExc_ValueError, "pieces: %s is not %zd native int64 items", what, n);
        else
            PyErr_Format(PyExc_ValueError, "pieces: %s is not native int64 items", what);
        return -1;
    }
    return 0;
}

PyObject *copy_pieces(PyObject *self, PyObject *args)
{
    PyObject *out_o, *dst_o, *src_o, *off_o, *len_o;
    if (!PyArg_ParseTuple(args, "OOOOO", &out_o, &dst_o, &src_o, &off_o, &len_o))
        return NULL;
    Py_buffer out, src, dst, off, len;
    if (PyObject_GetBuffer(out_o, &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (PyObject_GetBuffer(src_o, &src, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&out);
        return NULL;
    }
    int held = 0;
    if (int64s(len_o, &len, -1, "len") == 0) {
        held = 1;
        Py_ssize_t n = len.len / 8;
        if (int64s(dst_o, &dst, n, "dst") == 0) {
            held = 2;
            if (int64s(off_o, &off, n, "src_off") == 0)
                held = 3;
        }
    }
    PyObject *result = NULL;
    if (held == 3) {
        const int64_t *d = dst.buf, *o = off.buf, *l = len.buf;
        Py_ssize_t n = len.len / 8, i;
        int64_t olen = (int64_t)out.len, slen = (int64_t)src.len;
        for (i = 0; i < n; i++)          /* all checked first: an error writes nothing */
            if (l[i] < 0 || d[i] < 0 || o[i] < 0 || l[i] > olen - d[i] || l[i] > slen - o[i])
                break;
        if (i < n) {
            PyErr_Format(PyExc_ValueError, "pieces: piece %zd is outside a buffer", i);
        } else {
            unsigned char *ob = out.buf;
            const unsigned char *sb = src.buf;
            Py_BEGIN_ALLOW_THREADS
            for (i = 0; i < n; i++)      /* (memmove: out and src may be one buffer) */
                memmove(ob + d[i], sb + o[i], (size_t)l[i]);
            Py_END_ALLOW_THREADS
            result = Py_NewRef(Py_None);
        }
    }
    if (held >= 3)
        PyBuffer_Release(&off);
    if (held >= 2)
        PyBuffer_Release(&dst);
    if (held >= 1)
        PyBuffer_Release(&len);
    PyBuffer_Release(&src);
    PyBuffer_Release(&out);
    return result;
}
