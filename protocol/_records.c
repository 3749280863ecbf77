/* The record walk of protocol/records.py in C, for the produce hot path.
 *
 * walk(buffer, pos, end, count) checks that buffer[pos:end] holds exactly `count`
 * well-formed v2 records numbered 0..count-1, under the same rules as the Python walk
 * (records.py documents them), and answers:
 *   -1  the records break a rule (the caller walks them again in Python, which says
 *       which rule, with Kafka's message: a refusal is rare, its cost irrelevant);
 *   n   they are well formed, and n of them have a null key.
 * walk_listing(buffer, pos, end, count, limit) walks the same way and answers
 * (n, indexes): n as above, and the indexes of the first `limit` records with a null
 * key, which a compacted topic refuses one by one.
 * keys_and_values(buffer, pos, end, count) reads each record's offset delta, key and
 * value: what a coordinator replaying its internal topic needs.
 * walk and walk_listing release the GIL: the buffer is held by the Py_buffer.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* A zigzag varint of at most max_bytes bytes, all before end. 0 if there is none. */
static inline int read_zigzag(const unsigned char **pp, const unsigned char *end, int max_bytes, int64_t *out)
{
    const unsigned char *p = *pp;
    uint64_t raw = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (p >= end)
            return 0;
        unsigned char b = *p++;
        raw |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            *pp = p;
            return 1;
        }
    }
    return 0;
}

/* Skips a length-prefixed field: length >= 0 bytes follow, -1 is null (counted in
 * *nulls when nulls is not NULL); anything else is invalid. */
static inline int skip_field(const unsigned char **pp, const unsigned char *end, Py_ssize_t *nulls)
{
    int64_t length;
    if (!read_zigzag(pp, end, 5, &length))
        return 0;
    if (length >= 0) {
        if (length > end - *pp)
            return 0;
        *pp += length;
        return 1;
    }
    if (length == -1) {
        if (nulls)
            (*nulls)++;
        return 1;
    }
    return 0;
}

static Py_ssize_t walk_records(const unsigned char *p, const unsigned char *end, Py_ssize_t count,
                               Py_ssize_t *listed, Py_ssize_t max_listed)
{
    Py_ssize_t null_keys = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t size, value;
        if (!read_zigzag(&p, end, 5, &size) || size < 0 || size > end - p)
            return -1;
        const unsigned char *body_end = p + size;
        if (p >= body_end)
            return -1;
        p++; /* attributes */
        if (!read_zigzag(&p, body_end, 10, &value)) /* timestamp delta */
            return -1;
        if (!read_zigzag(&p, body_end, 5, &value) || value != i) /* offset delta */
            return -1;
        Py_ssize_t nulls_before = null_keys;
        if (!skip_field(&p, body_end, &null_keys) || !skip_field(&p, body_end, NULL))
            return -1;
        if (null_keys != nulls_before && nulls_before < max_listed)
            listed[nulls_before] = i;
        int64_t headers;
        if (!read_zigzag(&p, body_end, 5, &headers) || headers < 0 || headers > body_end - p)
            return -1;
        for (int64_t h = 0; h < headers; h++) {
            int64_t key_length;
            if (!read_zigzag(&p, body_end, 5, &key_length) || key_length < 0 || key_length > body_end - p)
                return -1;
            p += key_length;
            if (!skip_field(&p, body_end, NULL))
                return -1;
        }
        if (p != body_end)
            return -1;
    }
    return p == end ? null_keys : -1;
}

static PyObject *walk(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, end, count, result;
    if (!PyArg_ParseTuple(args, "y*nnn", &view, &pos, &end, &count))
        return NULL;
    if (pos < 0 || pos > end || end > view.len || count < 0) {
        result = -1;
    } else {
        const unsigned char *base = (const unsigned char *)view.buf;
        Py_BEGIN_ALLOW_THREADS
        result = walk_records(base + pos, base + end, count, NULL, 0);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(result);
}

static PyObject *walk_listing(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, end, count, limit, result = -1;
    if (!PyArg_ParseTuple(args, "y*nnnn", &view, &pos, &end, &count, &limit))
        return NULL;
    if (limit < 0)
        limit = 0;
    Py_ssize_t *listed = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(limit ? limit : 1));
    if (listed == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    if (!(pos < 0 || pos > end || end > view.len || count < 0)) {
        const unsigned char *base = (const unsigned char *)view.buf;
        Py_BEGIN_ALLOW_THREADS
        result = walk_records(base + pos, base + end, count, listed, limit);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    Py_ssize_t shown = result < 0 ? 0 : (result < limit ? result : limit);
    PyObject *indexes = PyList_New(shown);
    if (indexes == NULL) {
        PyMem_Free(listed);
        return NULL;
    }
    for (Py_ssize_t k = 0; k < shown; k++) {
        PyObject *index = PyLong_FromSsize_t(listed[k]);
        if (index == NULL) {
            Py_DECREF(indexes);
            PyMem_Free(listed);
            return NULL;
        }
        PyList_SET_ITEM(indexes, k, index);
    }
    PyMem_Free(listed);
    return Py_BuildValue("(nN)", result, indexes);
}

/* A length-prefixed field as bytes, Py_None for null; NULL with no exception set if the
 * field is malformed, NULL with one set if memory ran out. */
static PyObject *read_field(const unsigned char **pp, const unsigned char *end)
{
    int64_t length;
    if (!read_zigzag(pp, end, 5, &length))
        return NULL;
    if (length == -1)
        Py_RETURN_NONE;
    if (length < 0 || length > end - *pp)
        return NULL;
    PyObject *field = PyBytes_FromStringAndSize((const char *)*pp, (Py_ssize_t)length);
    *pp += length;
    return field;
}

/* keys_and_values(buffer, pos, end, count) -> [(offset delta, key, value), ...] for the
 * `count` records in buffer[pos:end], or None if they are not well formed. Replaying an
 * internal topic needs nothing else of a record. */
static PyObject *keys_and_values(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, end, count;
    if (!PyArg_ParseTuple(args, "y*nnn", &view, &pos, &end, &count))
        return NULL;
    PyObject *out = NULL, *key = NULL, *value = NULL;
    if (pos < 0 || pos > end || end > view.len || count < 0 || count > end - pos)
        goto malformed;
    out = PyList_New(0);
    if (out == NULL)
        goto fail;
    const unsigned char *p = (const unsigned char *)view.buf + pos, *stop = (const unsigned char *)view.buf + end;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t size, ignored, offset_delta, headers;
        if (!read_zigzag(&p, stop, 5, &size) || size <= 0 || size > stop - p)
            goto malformed;
        const unsigned char *body_end = p + size;
        p++; /* attributes */
        if (!read_zigzag(&p, body_end, 10, &ignored) || !read_zigzag(&p, body_end, 5, &offset_delta))
            goto malformed;
        key = read_field(&p, body_end);
        if (key == NULL)
            goto malformed_or_fail;
        value = read_field(&p, body_end);
        if (value == NULL)
            goto malformed_or_fail;
        if (!read_zigzag(&p, body_end, 5, &headers) || headers < 0 || headers > body_end - p)
            goto malformed;
        for (int64_t h = 0; h < headers; h++) {
            int64_t key_length;
            if (!read_zigzag(&p, body_end, 5, &key_length) || key_length < 0 || key_length > body_end - p)
                goto malformed;
            p += key_length;
            if (!skip_field(&p, body_end, NULL))
                goto malformed;
        }
        if (p != body_end)
            goto malformed;
        PyObject *entry = Py_BuildValue("(LNN)", (long long)offset_delta, key, value);
        key = value = NULL; /* the tuple holds them now (or released them on failure) */
        if (entry == NULL || PyList_Append(out, entry) < 0) {
            Py_XDECREF(entry);
            goto fail;
        }
        Py_DECREF(entry);
    }
    if (p != stop)
        goto malformed;
    PyBuffer_Release(&view);
    return out;
malformed_or_fail:
    if (PyErr_Occurred())
        goto fail;
malformed:
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS,
     "walk(buffer, pos, end, count) -> -1 if the records are invalid, else how many have a null key"},
    {"walk_listing", walk_listing, METH_VARARGS,
     "walk_listing(buffer, pos, end, count, limit) -> (walk's answer, indexes of the first `limit` null keys)"},
    {"keys_and_values", keys_and_values, METH_VARARGS,
     "keys_and_values(buffer, pos, end, count) -> [(offset delta, key, value), ...] or None if malformed"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_records", NULL, -1, methods};

PyMODINIT_FUNC PyInit__records(void) { return PyModule_Create(&module); }
