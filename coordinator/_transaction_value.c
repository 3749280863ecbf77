/* The value of a `__transaction_state` record, encoded in one call: the C twin of
 * coordinator/transaction_log.py's encode_value, which stays the specification
 * (OTTLA_PURE_PYTHON=1 runs it; tests/unit/test_transaction_value.py compares both,
 * value for value, and what the twin refuses the C call refuses too).
 *
 * Every change of a transaction (AddPartitionsToTxn, the prepare and the completion of
 * an EndTxn, InitProducerId) writes one such value. In Python it is a call of its own,
 * two struct packs, the cached array of the partitions and a join: about 5k
 * instructions; here a few hundred.
 *
 * TransactionLogValue v1 (big-endian; flexible: compact arrays and strings, whose
 * lengths are unsigned varints of length + 1, and tagged fields):
 *   version int16 1 | ProducerId int64 | ProducerEpoch int16 | TransactionTimeoutMs int32 |
 *   TransactionStatus int8 | TransactionPartitions: null (Empty, no partitions) or
 *   [Topic compact string, PartitionIds compact [int32], no tags], by topic, each sorted |
 *   TransactionLastUpdateTimestampMs int64 | TransactionStartTimestampMs int64 |
 *   tags: 0 PreviousProducerId int64 (if not -1), 1 NextProducerId int64 (if not -1),
 *         2 ClientTransactionVersion int16 (if not 0)
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../protocol/_encode.h"

#define FIELDS 10 /* TxnRecord's */
#define VALUE_VERSION 1
#define EMPTY_STATE 0

/* The integer `item` within [low, high] into *out; -1 with an exception otherwise. */
static int integer(PyObject *item, long long low, long long high, const char *what, long long *out)
{
    long long value = PyLong_AsLongLong(item);
    if (value == -1 && PyErr_Occurred())
        return -1;
    if (value < low || value > high) {
        PyErr_Format(PyExc_ValueError, "%s %lld is out of range", what, value);
        return -1;
    }
    *out = value;
    return 0;
}

/* One (topic, partition) of the set, checked: its topic's UTF-8 and its partition id. */
static int entry(PyObject *pair, const char **topic, Py_ssize_t *topic_size, PyObject **topic_object,
                 long long *partition)
{
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(pair, 0))) {
        PyErr_SetString(PyExc_TypeError, "a transaction's partition is a (topic, partition) pair");
        return -1;
    }
    *topic_object = PyTuple_GET_ITEM(pair, 0);
    *topic = PyUnicode_AsUTF8AndSize(*topic_object, topic_size);
    if (*topic == NULL)
        return -1;
    return integer(PyTuple_GET_ITEM(pair, 1), INT32_MIN, INT32_MAX, "partition", partition);
}

/* The partitions' array, sorted by topic and partition as the twin sorts them, into
 * `out` (NULL: only its size is counted). */
static Py_ssize_t partitions_array(PyObject *sorted, unsigned char *out)
{
    Py_ssize_t n = PyList_GET_SIZE(sorted), size = 0, topics = 0;
    PyObject *previous = NULL, *topic_object;
    const char *topic;
    Py_ssize_t topic_size;
    long long partition;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (entry(PyList_GET_ITEM(sorted, i), &topic, &topic_size, &topic_object, &partition) < 0)
            return -1;
        if (previous == NULL || PyUnicode_Compare(topic_object, previous) != 0)
            topics++;
        previous = topic_object;
    }
    size += put_uvarint(out, (uint64_t)topics + 1);
    for (Py_ssize_t first = 0; first < n;) {
        if (entry(PyList_GET_ITEM(sorted, first), &topic, &topic_size, &topic_object, &partition) < 0)
            return -1;
        Py_ssize_t end = first + 1; /* every entry was checked above: a (str, int) pair */
        while (end < n && PyUnicode_Compare(PyTuple_GET_ITEM(PyList_GET_ITEM(sorted, end), 0), topic_object) == 0)
            end++;
        size += put_uvarint(out == NULL ? NULL : out + size, (uint64_t)topic_size + 1);
        if (out != NULL)
            memcpy(out + size, topic, (size_t)topic_size);
        size += topic_size;
        size += put_uvarint(out == NULL ? NULL : out + size, (uint64_t)(end - first) + 1);
        for (Py_ssize_t i = first; i < end; i++) {
            if (i > first && entry(PyList_GET_ITEM(sorted, i), &topic, &topic_size, &topic_object, &partition) < 0)
                return -1;
            if (out != NULL)
                put_be(out + size, (uint64_t)partition, 4);
            size += 4;
        }
        if (out != NULL)
            out[size] = 0; /* the entry's tagged fields: none */
        size += 1;
        first = end;
    }
    return size;
}

/* encode_value(record) -> bytes: `record` is a TxnRecord (a tuple of its ten fields). */
static PyObject *encode_value(PyObject *self, PyObject *record)
{
    if (!PyTuple_Check(record) || PyTuple_GET_SIZE(record) != FIELDS) {
        PyErr_SetString(PyExc_TypeError, "encode_value takes a TxnRecord");
        return NULL;
    }
    /* producer id, epoch, timeout, state, -, last update, start, previous id, next id, version */
    static const long long low[FIELDS] = {INT64_MIN, INT16_MIN, INT32_MIN, INT8_MIN, 0,
                                          INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN, INT16_MIN};
    static const long long high[FIELDS] = {INT64_MAX, INT16_MAX, INT32_MAX, INT8_MAX, 0,
                                           INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT16_MAX};
    static const char *const names[FIELDS] = {"producer id", "producer epoch", "timeout", "state", "",
                                              "last update", "start", "previous producer id",
                                              "next producer id", "client transaction version"};
    long long f[FIELDS];
    for (int i = 0; i < FIELDS; i++)
        if (i != 4 && integer(PyTuple_GET_ITEM(record, i), low[i], high[i], names[i], &f[i]) < 0)
            return NULL;
    PyObject *partitions = PyTuple_GET_ITEM(record, 4);
    int any = PyObject_IsTrue(partitions);
    if (any < 0)
        return NULL;
    PyObject *sorted = NULL;
    Py_ssize_t array_size = 1; /* a null or an empty array: one byte */
    if (any) {
        if (!PyFrozenSet_Check(partitions)) {
            PyErr_SetString(PyExc_TypeError, "a transaction's partitions are a frozenset");
            return NULL;
        }
        sorted = PySequence_List(partitions);
        if (sorted == NULL)
            return NULL;
        if (PyList_Sort(sorted) < 0 || (array_size = partitions_array(sorted, NULL)) < 0) {
            Py_DECREF(sorted);
            return NULL;
        }
    }
    int tags = (f[7] != -1) + (f[8] != -1) + (f[9] != 0);
    Py_ssize_t size = 17 + array_size + 16 + 1 + (f[7] != -1) * 10 + (f[8] != -1) * 10 + (f[9] != 0) * 4;
    PyObject *value = PyBytes_FromStringAndSize(NULL, size);
    if (value == NULL) {
        Py_XDECREF(sorted);
        return NULL;
    }
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(value);
    out = put_be(out, VALUE_VERSION, 2);
    out = put_be(out, (uint64_t)f[0], 8);
    out = put_be(out, (uint64_t)f[1], 2);
    out = put_be(out, (uint64_t)f[2], 4);
    out = put_be(out, (uint64_t)f[3], 1);
    if (sorted != NULL) {
        Py_ssize_t written = partitions_array(sorted, out);
        Py_DECREF(sorted);
        if (written < 0) {  /* its second pass failed where the first, sizing, did not */
            Py_DECREF(value);
            return NULL;
        }
        out += written;
    } else {
        /* Kafka writes an Empty transaction's partitions as a null array, not an empty one. */
        *out++ = f[3] == EMPTY_STATE ? 0 : 1;
    }
    out = put_be(out, (uint64_t)f[5], 8);
    out = put_be(out, (uint64_t)f[6], 8);
    *out++ = (unsigned char)tags;
    if (f[7] != -1) {
        *out++ = 0;
        *out++ = 8;
        out = put_be(out, (uint64_t)f[7], 8);
    }
    if (f[8] != -1) {
        *out++ = 1;
        *out++ = 8;
        out = put_be(out, (uint64_t)f[8], 8);
    }
    if (f[9] != 0) {
        *out++ = 2;
        *out++ = 2;
        put_be(out, (uint64_t)f[9], 2);
    }
    return value;
}

static PyMethodDef methods[] = {
    {"encode_value", encode_value, METH_O, "encode_value(record: TxnRecord) -> bytes: its TransactionLogValue v1"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_transaction_value", NULL, -1, methods};

PyMODINIT_FUNC PyInit__transaction_value(void)
{
    return PyModule_Create(&module);
}
