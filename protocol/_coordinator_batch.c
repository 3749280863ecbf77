/* A coordinator's batch of its own records, encoded in one call: the C twin of
 * protocol/batch.py's records_batch, which stays the specification (OTTLA_PURE_PYTHON=1
 * runs it; tests/unit/test_coordinator_batch.py compares both, answer for answer).
 *
 * Every change of a transaction and every offset commit appends one such batch to
 * __transaction_state or __consumer_offsets: records of a key and a value (or None, a
 * tombstone), no headers, one timestamp, base sequence -1. In Python it costs about 14k
 * instructions (two struct packs of many fields, a join, the CRC call and the header
 * tuple); here a few hundred, plus the CRC, which is the crc32c package's function
 * (set_types hands it over once, with the BatchHeader class the header is made of).
 *
 * Layout (big-endian; varints zigzag-encoded, as Kafka's DefaultRecord writes them):
 *   baseOffset int64 0 | batchLength int32 | partitionLeaderEpoch int32 0 | magic int8 2 |
 *   crc uint32 (CRC-32C of everything after it) | attributes int16 | lastOffsetDelta int32 |
 *   baseTimestamp int64 | maxTimestamp int64 | producerId int64 | producerEpoch int16 |
 *   baseSequence int32 -1 | recordCount int32 | records
 * and each record:
 *   length varint | attributes int8 0 | timestampDelta varint 0 | offsetDelta varint |
 *   keyLength varint | key | valueLength varint (-1: null) | value | headerCount varint 0
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_encode.h"

#define HEADER_SIZE 61
#define CRC_OFFSET 17
#define ATTRIBUTES_OFFSET 21
#define MAGIC 2

static PyObject *header_type = NULL;  /* protocol.batch.BatchHeader */
static PyObject *crc_function = NULL; /* crc32c.crc32c */

static PyObject *set_types(PyObject *self, PyObject *args)
{
    PyObject *header, *crc;
    if (!PyArg_ParseTuple(args, "O!O", &PyType_Type, &header, &crc))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)header, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "the header type must be a tuple's (a named tuple)");
        return NULL;
    }
    if (!PyCallable_Check(crc)) {
        PyErr_SetString(PyExc_TypeError, "the CRC function must be callable");
        return NULL;
    }
    Py_INCREF(header);
    Py_XSETREF(header_type, header);
    Py_INCREF(crc);
    Py_XSETREF(crc_function, crc);
    Py_RETURN_NONE;
}

/* One record's (key, value) pair (a tuple, or a list as the twin unpacks it too),
 * checked: bytes and bytes or None. */
static int record_fields(PyObject *record, PyObject **key, PyObject **value)
{
    if (PyTuple_Check(record) && PyTuple_GET_SIZE(record) == 2) {
        *key = PyTuple_GET_ITEM(record, 0);
        *value = PyTuple_GET_ITEM(record, 1);
    } else if (PyList_Check(record) && PyList_GET_SIZE(record) == 2) {
        *key = PyList_GET_ITEM(record, 0);
        *value = PyList_GET_ITEM(record, 1);
    } else {
        PyErr_SetString(PyExc_TypeError, "a record is a (key, value) pair");
        return -1;
    }
    if (!PyBytes_Check(*key) || (*value != Py_None && !PyBytes_Check(*value))) {
        PyErr_SetString(PyExc_TypeError, "a record's key is bytes and its value bytes or None");
        return -1;
    }
    return 0;
}

/* The size of a record's body (what its length varint counts) at offset delta `i`. */
static Py_ssize_t body_size(Py_ssize_t i, PyObject *key, PyObject *value)
{
    Py_ssize_t key_size = PyBytes_GET_SIZE(key);
    Py_ssize_t size = 2 + put_varint(NULL, i) + put_varint(NULL, key_size) + key_size + 1;
    if (value == Py_None)
        return size + 1;
    Py_ssize_t value_size = PyBytes_GET_SIZE(value);
    return size + put_varint(NULL, value_size) + value_size;
}

static int in_range(long long value, long long low, long long high, const char *what)
{
    if (value < low || value > high) {
        PyErr_Format(PyExc_ValueError, "%s %lld is out of range", what, value);
        return -1;
    }
    return 0;
}

/* records_batch(records, timestamp, producer_id=-1, producer_epoch=-1, attributes=0)
 * -> (batch, header) */
static PyObject *records_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (header_type == NULL || crc_function == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "set_types was not called");
        return NULL;
    }
    if (nargs < 2 || nargs > 5) {
        PyErr_SetString(PyExc_TypeError, "records_batch(records, timestamp, producer_id=-1, producer_epoch=-1, "
                                         "attributes=0)");
        return NULL;
    }
    PyObject *records = args[0];
    if (!PyList_Check(records)) {
        PyErr_SetString(PyExc_TypeError, "records is a list of (key, value) tuples");
        return NULL;
    }
    long long numbers[4] = {0, -1, -1, 0}; /* timestamp, producer id, producer epoch, attributes */
    for (Py_ssize_t i = 1; i < nargs; i++) {
        numbers[i - 1] = PyLong_AsLongLong(args[i]);
        if (numbers[i - 1] == -1 && PyErr_Occurred())
            return NULL;
    }
    long long timestamp = numbers[0], producer_id = numbers[1], epoch = numbers[2], attributes = numbers[3];
    if (in_range(epoch, INT16_MIN, INT16_MAX, "producer epoch") < 0
            || in_range(attributes, INT16_MIN, INT16_MAX, "attributes") < 0)
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(records);
    if (count > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "too many records");
        return NULL;
    }
    /* First pass: every record checked and sized. */
    Py_ssize_t total = HEADER_SIZE;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *key, *value;
        if (record_fields(PyList_GET_ITEM(records, i), &key, &value) < 0)
            return NULL;
        Py_ssize_t size = body_size(i, key, value);
        total += put_varint(NULL, size) + size;
        if (total - ATTRIBUTES_OFFSET > INT32_MAX - 9) {
            PyErr_SetString(PyExc_ValueError, "the batch is too large");
            return NULL;
        }
    }
    PyObject *batch = PyBytes_FromStringAndSize(NULL, total);
    if (batch == NULL)
        return NULL;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(batch);
    int32_t length = (int32_t)(total - 12);
    put_be(out, 0, 8);
    put_be(out + 8, (uint32_t)length, 4);
    put_be(out + 12, 0, 4);
    out[16] = MAGIC;
    put_be(out + ATTRIBUTES_OFFSET, (uint16_t)attributes, 2);
    put_be(out + 23, (uint32_t)(count - 1), 4);
    put_be(out + 27, (uint64_t)timestamp, 8);
    put_be(out + 35, (uint64_t)timestamp, 8);
    put_be(out + 43, (uint64_t)producer_id, 8);
    put_be(out + 51, (uint16_t)epoch, 2);
    put_be(out + 53, 0xFFFFFFFFu, 4);
    put_be(out + 57, (uint32_t)count, 4);
    /* Second pass: the records (their sizes computed again: cheaper than keeping them). */
    unsigned char *p = out + HEADER_SIZE;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *key, *value;
        record_fields(PyList_GET_ITEM(records, i), &key, &value); /* checked in the first pass */
        Py_ssize_t key_size = PyBytes_GET_SIZE(key);
        p += put_varint(p, body_size(i, key, value));
        *p++ = 0; /* attributes */
        *p++ = 0; /* timestamp delta */
        p += put_varint(p, i);
        p += put_varint(p, key_size);
        memcpy(p, PyBytes_AS_STRING(key), (size_t)key_size);
        p += key_size;
        if (value == Py_None) {
            p += put_varint(p, -1);
        } else {
            Py_ssize_t value_size = PyBytes_GET_SIZE(value);
            p += put_varint(p, value_size);
            memcpy(p, PyBytes_AS_STRING(value), (size_t)value_size);
            p += value_size;
        }
        *p++ = 0; /* no headers */
    }
    /* The CRC, by the crc32c package over a view of what follows it. */
    PyObject *view = PyMemoryView_FromMemory((char *)out + ATTRIBUTES_OFFSET, total - ATTRIBUTES_OFFSET, PyBUF_READ);
    if (view == NULL) {
        Py_DECREF(batch);
        return NULL;
    }
    PyObject *crc_object = PyObject_CallOneArg(crc_function, view);
    Py_DECREF(view);
    if (crc_object == NULL) {
        Py_DECREF(batch);
        return NULL;
    }
    unsigned long crc = PyLong_AsUnsignedLong(crc_object);
    if (crc == (unsigned long)-1 && PyErr_Occurred()) {
        Py_DECREF(crc_object);
        Py_DECREF(batch);
        return NULL;
    }
    put_be(out + CRC_OFFSET, (uint32_t)crc, 4);
    /* The header: BatchHeader's fields, in its order, as BatchHeader.parse reads them,
     * made straight into an instance of the named tuple (as tuple.__new__(BatchHeader,
     * fields) makes it, without the tuple in between). */
    PyObject *header = ((PyTypeObject *)header_type)->tp_alloc((PyTypeObject *)header_type, 13);
    if (header == NULL) {
        Py_DECREF(crc_object);
        Py_DECREF(batch);
        return NULL;
    }
    PyObject *items[13] = {
        PyLong_FromLong(0), PyLong_FromLong(length), PyLong_FromLong(0), PyLong_FromLong(MAGIC), crc_object,
        PyLong_FromLong((long)attributes), PyLong_FromSsize_t(count - 1), PyLong_FromLongLong(timestamp),
        PyLong_FromLongLong(timestamp), PyLong_FromLongLong(producer_id), PyLong_FromLong((long)epoch),
        PyLong_FromLong(-1), PyLong_FromSsize_t(count),
    };
    int failed = 0;
    for (int i = 0; i < 13; i++) {
        if (items[i] == NULL)
            failed = 1;
        PyTuple_SET_ITEM(header, i, items[i]); /* steals; a NULL item is cleared with the tuple */
    }
    if (failed) {
        Py_DECREF(header);
        Py_DECREF(batch);
        return NULL;
    }
    PyObject *answer = PyTuple_Pack(2, batch, header);
    Py_DECREF(batch);
    Py_DECREF(header);
    return answer;
}

static PyMethodDef methods[] = {
    {"set_types", set_types, METH_VARARGS,
     "set_types(BatchHeader, crc32c): the header class records_batch answers and the CRC-32C it computes with"},
    {"records_batch", (PyCFunction)(void (*)(void))records_batch, METH_FASTCALL,
     "records_batch(records, timestamp, producer_id=-1, producer_epoch=-1, attributes=0) -> (batch, header)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_coordinator_batch", NULL, -1, methods};

PyMODINIT_FUNC PyInit__coordinator_batch(void)
{
    return PyModule_Create(&module);
}
