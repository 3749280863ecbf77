/* A batch recorded in a partition's producer state, for the append path:
 * storage/producer_state.py's ProducerStateManager.record in C.
 *
 * record(manager, header, base_offset, track_sequence) does what
 * manager.record(header, base_offset, track_sequence) does, step for step and in the same
 * order: the manager marked changed; the producer's entry given the batch's epoch (its
 * cached batches dropped when the epoch changes) and last timestamp; then, unless the
 * batch is a marker, its BatchMetadata cached (with track_sequence) and, for a
 * transactional batch, the producer's transaction opened at base_offset when none is.
 * The arithmetic is Python's (PyNumber_*), on the header's own int objects.
 *
 * A producer the manager has no entry for yet, or a header that is no 13-tuple, is left
 * to the Python method itself (called from here: a new producer is rare, and its entry's
 * defaults are the dataclass's business). The fields are read and written by name
 * (`changed`, `producers`, `ongoing_txns` of the manager; `epoch`, `batches`,
 * `last_timestamp`, `current_txn_first_offset` of the entry): a renamed one raises
 * AttributeError here, which tests/unit/test_producer_state_record.py sees. That test
 * holds this and the Python method to the same state after every batch.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define TRANSACTIONAL_FLAG 0x10
#define CONTROL_FLAG 0x20

/* The header's fields (protocol.batch.BatchHeader) by position. */
enum { H_ATTRIBUTES = 5, H_LAST_OFFSET_DELTA = 6, H_MAX_TIMESTAMP = 8, H_PRODUCER_ID = 9, H_PRODUCER_EPOCH = 10,
       H_BASE_SEQUENCE = 11, H_FIELDS = 13 };

static PyTypeObject *metadata_type = NULL; /* producer_state.BatchMetadata, set at import */
static PyObject *s_changed, *s_producers, *s_ongoing_txns, *s_epoch, *s_batches, *s_last_timestamp,
    *s_current_txn_first_offset, *s_record, *s_clear, *s_append, *sequence_span, *no_sequence, *zero;

static PyObject *set_batch_metadata_type(PyObject *self, PyObject *type)
{
    if (!PyType_Check(type) || !PyType_IsSubtype((PyTypeObject *)type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "BatchMetadata must be a tuple type");
        return NULL;
    }
    Py_INCREF(type);
    Py_XSETREF(metadata_type, (PyTypeObject *)type);
    Py_RETURN_NONE;
}

/* BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp), as
 * tuple.__new__ builds it in the Python method. */
static PyObject *batch_metadata(PyObject *first_seq, PyObject *delta, PyObject *base_offset,
                                PyObject *max_timestamp)
{
    PyObject *last_seq, *last_offset;
    int no_first = PyObject_RichCompareBool(first_seq, no_sequence, Py_EQ);
    if (no_first < 0)
        return NULL;
    if (no_first) {
        last_seq = Py_NewRef(no_sequence);
    } else {
        PyObject *sum = PyNumber_Add(first_seq, delta);
        if (sum == NULL)
            return NULL;
        last_seq = PyNumber_Remainder(sum, sequence_span);
        Py_DECREF(sum);
        if (last_seq == NULL)
            return NULL;
    }
    last_offset = PyNumber_Add(base_offset, delta);
    if (last_offset == NULL) {
        Py_DECREF(last_seq);
        return NULL;
    }
    PyObject *metadata = metadata_type->tp_alloc(metadata_type, 5);
    if (metadata == NULL) {
        Py_DECREF(last_seq);
        Py_DECREF(last_offset);
        return NULL;
    }
    PyTuple_SET_ITEM(metadata, 0, Py_NewRef(first_seq));
    PyTuple_SET_ITEM(metadata, 1, last_seq);
    PyTuple_SET_ITEM(metadata, 2, Py_NewRef(base_offset));
    PyTuple_SET_ITEM(metadata, 3, last_offset);
    PyTuple_SET_ITEM(metadata, 4, Py_NewRef(max_timestamp));
    return metadata;
}

/* The attribute's int value compared with `other` by `op`: 1, 0, or -1 with an exception. */
static int attr_compare(PyObject *owner, PyObject *name, PyObject *other, int op)
{
    PyObject *value = PyObject_GetAttr(owner, name);
    if (value == NULL)
        return -1;
    int result = PyObject_RichCompareBool(value, other, op);
    Py_DECREF(value);
    return result;
}

static PyObject *call_method_noargs(PyObject *owner, PyObject *name, PyObject *method)
{
    PyObject *target = PyObject_GetAttr(owner, name);
    if (target == NULL)
        return NULL;
    PyObject *result = PyObject_CallMethodNoArgs(target, method);
    Py_DECREF(target);
    return result;
}

static PyObject *record(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "record(manager, header, base_offset, track_sequence)");
        return NULL;
    }
    if (metadata_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "set_batch_metadata_type was not called");
        return NULL;
    }
    PyObject *manager = args[0], *header = args[1], *base_offset = args[2];
    int track_sequence = PyObject_IsTrue(args[3]);
    if (track_sequence < 0)
        return NULL;
    PyObject *producers = NULL, *entry = NULL, *result = NULL, *done = NULL;
    if (!PyTuple_Check(header) || PyTuple_GET_SIZE(header) != H_FIELDS)
        goto in_python;
    producers = PyObject_GetAttr(manager, s_producers);
    if (producers == NULL)
        return NULL;
    if (!PyDict_CheckExact(producers)) {
        Py_DECREF(producers);
        goto in_python;
    }
    PyObject *pid = PyTuple_GET_ITEM(header, H_PRODUCER_ID);
    entry = PyDict_GetItemWithError(producers, pid); /* borrowed: held before the dict goes */
    Py_XINCREF(entry);
    Py_DECREF(producers);
    if (entry == NULL) {
        if (PyErr_Occurred())
            return NULL;
        goto in_python; /* a new producer: its entry is made by the Python method */
    }
    if (PyObject_SetAttr(manager, s_changed, Py_True) < 0)
        goto done;
    PyObject *epoch = PyTuple_GET_ITEM(header, H_PRODUCER_EPOCH);
    int same_epoch = attr_compare(entry, s_epoch, epoch, Py_EQ);
    if (same_epoch < 0)
        goto done;
    if (!same_epoch) {
        if (PyObject_SetAttr(entry, s_epoch, epoch) < 0 || (done = call_method_noargs(entry, s_batches, s_clear)) == NULL)
            goto done;
        Py_CLEAR(done);
    }
    PyObject *max_timestamp = PyTuple_GET_ITEM(header, H_MAX_TIMESTAMP);
    if (PyObject_SetAttr(entry, s_last_timestamp, max_timestamp) < 0)
        goto done;
    long attributes = PyLong_AsLong(PyTuple_GET_ITEM(header, H_ATTRIBUTES));
    if (attributes == -1 && PyErr_Occurred())
        goto done;
    if (attributes & CONTROL_FLAG) { /* the marker's effect is complete_txn's business */
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (track_sequence) {
        PyObject *metadata = batch_metadata(PyTuple_GET_ITEM(header, H_BASE_SEQUENCE),
                                            PyTuple_GET_ITEM(header, H_LAST_OFFSET_DELTA), base_offset, max_timestamp);
        if (metadata == NULL)
            goto done;
        PyObject *batches = PyObject_GetAttr(entry, s_batches);
        if (batches == NULL) {
            Py_DECREF(metadata);
            goto done;
        }
        done = PyObject_CallMethodOneArg(batches, s_append, metadata);
        Py_DECREF(batches);
        Py_DECREF(metadata);
        if (done == NULL)
            goto done;
        Py_CLEAR(done);
    }
    if (attributes & TRANSACTIONAL_FLAG) {
        int none_open = attr_compare(entry, s_current_txn_first_offset, zero, Py_LT);
        if (none_open < 0)
            goto done;
        if (none_open) {
            if (PyObject_SetAttr(entry, s_current_txn_first_offset, base_offset) < 0)
                goto done;
            PyObject *ongoing = PyObject_GetAttr(manager, s_ongoing_txns);
            if (ongoing == NULL)
                goto done;
            int failed = PyObject_SetItem(ongoing, pid, base_offset);
            Py_DECREF(ongoing);
            if (failed < 0)
                goto done;
        }
    }
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(done);
    Py_DECREF(entry);
    return result;
in_python:
    return PyObject_CallMethodObjArgs(manager, s_record, header, base_offset, args[3], NULL);
}

static PyMethodDef methods[] = {
    {"record", (PyCFunction)(void (*)(void))record, METH_FASTCALL,
     "record(manager, header, base_offset, track_sequence): manager.record(header, base_offset, track_sequence)"},
    {"set_batch_metadata_type", set_batch_metadata_type, METH_O,
     "set_batch_metadata_type(BatchMetadata): the class of the cached batches' metadata"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_producer_state", NULL, -1, methods};

PyMODINIT_FUNC PyInit__producer_state(void)
{
    if ((s_changed = PyUnicode_InternFromString("changed")) == NULL
            || (s_producers = PyUnicode_InternFromString("producers")) == NULL
            || (s_ongoing_txns = PyUnicode_InternFromString("ongoing_txns")) == NULL
            || (s_epoch = PyUnicode_InternFromString("epoch")) == NULL
            || (s_batches = PyUnicode_InternFromString("batches")) == NULL
            || (s_last_timestamp = PyUnicode_InternFromString("last_timestamp")) == NULL
            || (s_current_txn_first_offset = PyUnicode_InternFromString("current_txn_first_offset")) == NULL
            || (s_record = PyUnicode_InternFromString("record")) == NULL
            || (s_clear = PyUnicode_InternFromString("clear")) == NULL
            || (s_append = PyUnicode_InternFromString("append")) == NULL
            || (sequence_span = PyLong_FromLongLong(2147483648LL)) == NULL
            || (no_sequence = PyLong_FromLong(-1)) == NULL
            || (zero = PyLong_FromLong(0)) == NULL)
        return NULL;
    return PyModule_Create(&module);
}
