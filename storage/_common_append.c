/* The common append in one call: storage/common_append.py's append_common_in_python in C.
 *
 * append_common(log, records, header) appends `records` (a checked batch, `header` its
 * BatchHeader) to the PartitionLog `log` when the append is the common one, and answers
 * its AppendResult; anything else answers None, having changed nothing, and the caller
 * runs PartitionLog.append_batch, which stays the specification. The common append:
 *   - the batch has no producer id, or its producer is known to the partition and the
 *     batch comes in sequence: in the producer's epoch (not NO_PRODUCER_EPOCH), no
 *     duplicate of a cached batch and the last one's next (0 with none cached, never
 *     wrapping); in a newer epoch (a transactional producer initialized again), sequence
 *     0; and a non-transactional batch's producer has no transaction open;
 *   - the active segment has bytes, the batch neither fills it past segment.bytes nor
 *     makes it older than segment.ms (no roll), no index entry is due
 *     (bytes_since_index_entry <= index.interval.bytes, the max timestamp known), its
 *     file is open and no write check (fault injection) is set;
 *   - a segment counted in OPEN_FILES is already open there (touch_open finds it).
 * Then, as append_batch -> _write -> LogSegment.append -> record_batch do it, in their
 * order: the batch written (write_batch: a failed write, or a short one cut off again,
 * is the KafkaError KAFKA_STORAGE_ERROR "write failed: ..."), the segment's size, max
 * timestamp and bytes since its index entry; the log end offset, the unflushed count
 * (log.flush() called at flush.messages), on_append called; the producer state's record.
 *
 * Attributes are read and written by name (a renamed one raises AttributeError, which
 * tests/unit/test_common_append.py sees); write_batch, record_batch, AppendResult,
 * KafkaError, its code and OPEN_FILES.touch_open are handed over once, by
 * common_append.py, so that this calls exactly what the Python path calls.
 * tests/unit/test_common_append.py holds this to append_batch's answers, files and state.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#define TRANSACTIONAL_FLAG 0x10
#define NO_PRODUCER_EPOCH (-1)
#define INT32_MAX_SEQ 2147483647LL
#define SEQUENCE_SPAN 2147483648LL

/* protocol.batch.BatchHeader's fields by position. */
enum { H_ATTRIBUTES = 5, H_LAST_OFFSET_DELTA = 6, H_MAX_TIMESTAMP = 8, H_PRODUCER_ID = 9, H_PRODUCER_EPOCH = 10,
       H_BASE_SEQUENCE = 11, H_RECORD_COUNT = 12, H_FIELDS = 13 };
/* producer_state.BatchMetadata's: first_seq, last_seq. */
enum { M_FIRST_SEQ = 0, M_LAST_SEQ = 1 };

static PyObject *append_result_type, *write_batch, *record_batch, *kafka_error, *storage_error_code, *touch_open;
static PyObject *s_producer_state, *s_producers, *s_epoch, *s_batches, *s_current_txn_first_offset, *s_segments,
    *s_size, *s_config, *s_segment_bytes, *s_segment_ms, *s_first_timestamp, *s_write_check, *s_fd, *s_pooled,
    *s_index_interval_bytes, *s_bytes_since_index_entry, *s_max_timestamp, *s_leader_epoch, *s_log_path,
    *s_log_end_offset, *s_unflushed_messages, *s_flush_messages, *s_flush, *s_on_append, *s_appends_wanted,
    *s_topic, *s_partition;

static PyObject *set_callables(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "set_callables(AppendResult, write_batch, record_batch, KafkaError, code, touch_open)");
        return NULL;
    }
    if (!PyType_Check(args[0]) || !PyType_IsSubtype((PyTypeObject *)args[0], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "set_callables: AppendResult must be a tuple type");
        return NULL;
    }
    PyObject **slots[6] = {&append_result_type, &write_batch, &record_batch, &kafka_error, &storage_error_code,
                           &touch_open};
    for (int i = 0; i < 6; i++)
        Py_XSETREF(*slots[i], Py_NewRef(args[i]));
    Py_RETURN_NONE;
}

/* An attribute as a C long long: 0; 1 (not mine) when it is no int or past int64; -1 an error. */
static int ll_attr(PyObject *obj, PyObject *name, long long *out)
{
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL)
        return -1;
    int result = 0;
    if (PyLong_CheckExact(value)) {
        int overflow;
        *out = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (*out == -1 && PyErr_Occurred())
            result = -1;
        else if (overflow)
            result = 1; /* not mine */
    } else {
        result = 1;
    }
    Py_DECREF(value);
    return result;
}

static int ll_item(PyObject *tuple, Py_ssize_t i, long long *out)
{
    PyObject *value = PyTuple_GET_ITEM(tuple, i);
    if (!PyLong_CheckExact(value))
        return 1;
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (*out == -1 && PyErr_Occurred())
        return -1;
    return overflow ? 1 : 0;
}

#define TRY(call)                                                                                                 \
    do {                                                                                                          \
        int r_ = (call);                                                                                          \
        if (r_ < 0)                                                                                               \
            goto error;                                                                                           \
        if (r_ > 0)                                                                                               \
            goto not_mine;                                                                                        \
    } while (0)

/* The producer's check (ProducerStateManager.check) for the common case, its APPEND with
 * no refusal: 0 mine, 1 not mine, -1 an error. In the producer's epoch (not
 * NO_PRODUCER_EPOCH): no cached batch the same, and the last one's next (0 with none
 * cached); in a newer epoch: sequence 0. A non-transactional batch: no transaction open. */
static int producer_in_sequence(PyObject *state, PyObject *header)
{
    long long attributes, delta, epoch, first_seq, entry_epoch, current = -1, txn_first;
    PyObject *producers = NULL, *entry = NULL, *batches = NULL, *iterator = NULL, *batch;
    int result = 1, r;
    if (ll_item(header, H_ATTRIBUTES, &attributes) || ll_item(header, H_LAST_OFFSET_DELTA, &delta)
        || ll_item(header, H_PRODUCER_EPOCH, &epoch) || ll_item(header, H_BASE_SEQUENCE, &first_seq))
        return PyErr_Occurred() ? -1 : 1;
    if (first_seq < 0 || delta < 0)
        return 1;
    producers = PyObject_GetAttr(state, s_producers);
    if (producers == NULL)
        return -1;
    if (!PyDict_CheckExact(producers))
        goto done;
    entry = PyDict_GetItemWithError(producers, PyTuple_GET_ITEM(header, H_PRODUCER_ID));
    if (entry == NULL) {
        result = PyErr_Occurred() ? -1 : 1;
        goto done;
    }
    Py_INCREF(entry); /* held before the dict may be let go of */
    if ((r = ll_attr(entry, s_epoch, &entry_epoch)) != 0) {
        result = r;
        goto done;
    }
    if (epoch == entry_epoch && entry_epoch != NO_PRODUCER_EPOCH) {
        /* The cached batches (a deque of at most five): none the same, the last one's next. */
        long long last_seq = (first_seq + delta) % SEQUENCE_SPAN;
        batches = PyObject_GetAttr(entry, s_batches);
        iterator = batches == NULL ? NULL : PyObject_GetIter(batches);
        if (iterator == NULL) {
            result = -1;
            goto done;
        }
        while ((batch = PyIter_Next(iterator)) != NULL) {
            long long cached_first = 0;
            r = 1;
            if (PyTuple_Check(batch) && PyTuple_GET_SIZE(batch) >= 2) {
                r = ll_item(batch, M_FIRST_SEQ, &cached_first);
                if (r == 0)
                    r = ll_item(batch, M_LAST_SEQ, &current);
            }
            Py_DECREF(batch);
            if (r == 0 && cached_first == first_seq && current == last_seq)
                r = 1; /* a duplicate */
            if (r) {
                result = r;
                goto done;
            }
        }
        if (PyErr_Occurred()) {
            result = -1;
            goto done;
        }
        if (current == INT32_MAX_SEQ || first_seq != current + 1)
            goto done;
    } else if (!(epoch > entry_epoch && first_seq == 0)) {
        goto done;
    }
    if (!(attributes & TRANSACTIONAL_FLAG)) {
        if ((r = ll_attr(entry, s_current_txn_first_offset, &txn_first)) != 0) {
            result = r;
            goto done;
        }
        if (txn_first >= 0)
            goto done;
    }
    result = 0;
done:
    Py_XDECREF(iterator);
    Py_XDECREF(batches);
    Py_XDECREF(entry);
    Py_XDECREF(producers);
    return result;
}

/* KafkaError(KAFKA_STORAGE_ERROR, "write failed: <what>") raised from the OSError set. */
static void storage_error(void)
{
    PyObject *type, *exc, *traceback;
    PyErr_Fetch(&type, &exc, &traceback);
    PyErr_NormalizeException(&type, &exc, &traceback);
    if (traceback != NULL)
        PyException_SetTraceback(exc, traceback);
    Py_XDECREF(type);
    Py_XDECREF(traceback);
    PyObject *message = PyUnicode_FromFormat("write failed: %S", exc);
    if (message != NULL) {
        PyObject *error = PyObject_CallFunctionObjArgs(kafka_error, storage_error_code, message, NULL);
        Py_DECREF(message);
        if (error != NULL) {
            PyException_SetCause(error, Py_NewRef(exc));
            PyException_SetContext(error, Py_NewRef(exc));
            PyErr_SetObject((PyObject *)Py_TYPE(error), error);
            Py_DECREF(error);
        }
    }
    Py_DECREF(exc);
}

static PyObject *append_common(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "append_common(log, records, header)");
        return NULL;
    }
    if (append_result_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "append_common before set_callables");
        return NULL;
    }
    PyObject *plog = args[0], *records = args[1], *header = args[2];
    PyObject *state = NULL, *segments = NULL, *active = NULL, *config = NULL, *value = NULL, *fd_obj = NULL;
    PyObject *result = NULL;
    long long pid, size_ll, max_timestamp, delta, record_count, active_size, segment_bytes, segment_ms,
        first_timestamp, interval, since_index, base_offset;
    if (!PyType_Check(append_result_type) || !PyTuple_Check(header) || PyTuple_GET_SIZE(header) != H_FIELDS)
        Py_RETURN_NONE;
    Py_ssize_t size = PyObject_Length(records);
    if (size < 0)
        return NULL;
    size_ll = size;
    TRY(ll_item(header, H_PRODUCER_ID, &pid));
    TRY(ll_item(header, H_MAX_TIMESTAMP, &max_timestamp));
    TRY(ll_item(header, H_LAST_OFFSET_DELTA, &delta));
    TRY(ll_item(header, H_RECORD_COUNT, &record_count));
    if (pid >= 0) {
        state = PyObject_GetAttr(plog, s_producer_state);
        if (state == NULL)
            goto error;
        TRY(producer_in_sequence(state, header));
    }
    /* _write: no roll, no write check. */
    segments = PyObject_GetAttr(plog, s_segments);
    if (segments == NULL)
        goto error;
    if (!PyList_CheckExact(segments) || PyList_GET_SIZE(segments) == 0)
        goto not_mine;
    active = Py_NewRef(PyList_GET_ITEM(segments, PyList_GET_SIZE(segments) - 1));
    config = PyObject_GetAttr(plog, s_config);
    if (config == NULL)
        goto error;
    TRY(ll_attr(active, s_size, &active_size));
    TRY(ll_attr(config, s_segment_bytes, &segment_bytes));
    TRY(ll_attr(config, s_segment_ms, &segment_ms));
    TRY(ll_attr(active, s_first_timestamp, &first_timestamp));
    long long age; /* Python's ints do not wrap: an age past int64 is a roll, not mine */
    if (active_size == 0 || active_size + size_ll > segment_bytes
        || __builtin_sub_overflow(max_timestamp, first_timestamp, &age) || age > segment_ms)
        goto not_mine;
    value = PyObject_GetAttr(plog, s_write_check);
    if (value == NULL)
        goto error;
    if (value != Py_None)
        goto not_mine;
    Py_CLEAR(value);
    /* LogSegment.append: its file open, no index entry due. */
    fd_obj = PyObject_GetAttr(active, s_fd);
    if (fd_obj == NULL)
        goto error;
    if (!PyLong_CheckExact(fd_obj))
        goto not_mine;
    TRY(ll_attr(config, s_index_interval_bytes, &interval));
    TRY(ll_attr(active, s_bytes_since_index_entry, &since_index));
    if (since_index > interval)
        goto not_mine;
    PyObject *current_max = PyObject_GetAttr(active, s_max_timestamp);
    if (current_max == NULL)
        goto error;
    long long current_max_ts;
    int r = 1;
    if (PyTuple_CheckExact(current_max) && PyTuple_GET_SIZE(current_max) == 2)
        r = ll_item(current_max, 0, &current_max_ts);
    Py_DECREF(current_max);
    TRY(r);
    TRY(ll_attr(plog, s_log_end_offset, &base_offset));
    if (delta < 0 || base_offset > INT64_MAX - delta - 1)
        goto not_mine;
    value = PyObject_GetAttr(active, s_pooled);
    if (value == NULL)
        goto error;
    int pooled = PyObject_IsTrue(value);
    Py_CLEAR(value);
    if (pooled < 0)
        goto error;
    if (pooled) {
        /* The most recently used: a segment not open in OPEN_FILES is append's touch. */
        value = PyObject_CallOneArg(touch_open, active);
        if (value == NULL) {
            if (PyErr_ExceptionMatches(PyExc_KeyError)) {
                PyErr_Clear();
                goto not_mine;
            }
            goto error;
        }
        Py_CLEAR(value);
    }
    /* Mine from here on: the write. */
    PyObject *base = PyLong_FromLongLong(base_offset);
    if (base == NULL)
        goto error;
    PyObject *leader_epoch = PyObject_GetAttr(plog, s_leader_epoch);
    if (leader_epoch == NULL) {
        Py_DECREF(base);
        goto error;
    }
    PyObject *write_args[4] = {fd_obj, records, base, leader_epoch};
    PyObject *written_obj = PyObject_Vectorcall(write_batch, write_args, 4, NULL);
    Py_DECREF(leader_epoch);
    if (written_obj == NULL) {
        Py_DECREF(base);
        if (PyErr_ExceptionMatches(PyExc_OSError))
            storage_error();
        goto error;
    }
    Py_ssize_t written = PyLong_AsSsize_t(written_obj);
    Py_DECREF(written_obj);
    if (written == -1 && PyErr_Occurred()) {
        Py_DECREF(base);
        goto error;
    }
    if (written != size) {
        /* A short write leaves a torn batch: cut off, as LogSegment.append cuts it. */
        Py_DECREF(base);
        long fd = PyLong_AsLong(fd_obj);
        int cut;
        do  /* retried when a signal interrupts it, as os.ftruncate is (PEP 475) */
            cut = ftruncate((int)fd, (off_t)active_size);
        while (cut < 0 && errno == EINTR && !PyErr_CheckSignals());
        if (cut < 0) {
            if (!PyErr_Occurred())
                PyErr_SetFromErrno(PyExc_OSError);
        } else {
            PyObject *path = PyObject_GetAttr(active, s_log_path);
            if (path != NULL) {
                PyErr_Format(PyExc_OSError, "short write to %S: %zd of %zd bytes", path, written, size);
                Py_DECREF(path);
            }
        }
        if (PyErr_ExceptionMatches(PyExc_OSError))
            storage_error();
        goto error;
    }
    /* The segment's size, max timestamp and bytes since its last index entry. */
    long long last_offset = base_offset + delta;
    value = PyLong_FromLongLong(active_size + size_ll);
    if (value == NULL || PyObject_SetAttr(active, s_size, value) < 0)
        goto error_base;
    Py_CLEAR(value);
    if (max_timestamp > current_max_ts) {
        value = Py_BuildValue("(LL)", max_timestamp, last_offset);
        if (value == NULL || PyObject_SetAttr(active, s_max_timestamp, value) < 0)
            goto error_base;
        Py_CLEAR(value);
    }
    value = PyLong_FromLongLong(since_index + size_ll);
    if (value == NULL || PyObject_SetAttr(active, s_bytes_since_index_entry, value) < 0)
        goto error_base;
    Py_CLEAR(value);
    /* The log's end, the unflushed count and its flush, on_append. */
    value = PyLong_FromLongLong(last_offset + 1);
    if (value == NULL || PyObject_SetAttr(plog, s_log_end_offset, value) < 0)
        goto error_base;
    Py_CLEAR(value);
    value = PyObject_GetAttr(plog, s_unflushed_messages);
    if (value == NULL)
        goto error_base;
    PyObject *sum = PyNumber_Add(value, PyTuple_GET_ITEM(header, H_RECORD_COUNT));
    Py_CLEAR(value);
    if (sum == NULL || PyObject_SetAttr(plog, s_unflushed_messages, sum) < 0) {
        Py_XDECREF(sum);
        goto error_base;
    }
    /* Compared as Python compares them: either may be past int64. */
    value = PyObject_GetAttr(config, s_flush_messages);
    int due = value == NULL ? -1 : PyObject_RichCompareBool(sum, value, Py_GE);
    Py_DECREF(sum);
    Py_CLEAR(value);
    if (due < 0)
        goto error_base;
    if (due) {
        value = PyObject_CallMethodNoArgs(plog, s_flush);
        if (value == NULL)
            goto error_base;
        Py_CLEAR(value);
    }
    PyObject *on_append = PyObject_GetAttr(plog, s_on_append);
    if (on_append == NULL)
        goto error_base;
    if (on_append != Py_None) {
        PyObject *topic = PyObject_GetAttr(plog, s_topic);
        PyObject *partition = topic == NULL ? NULL : PyObject_GetAttr(plog, s_partition);
        PyObject *wanted = partition == NULL ? NULL : PyObject_GetAttr(plog, s_appends_wanted);
        int call = wanted != NULL ? 1 : -1;  /* a failed read is an error, as Python's AttributeError */
        if (wanted != NULL && wanted != Py_None) {
            PyObject *key = PyTuple_Pack(2, topic, partition);
            call = key == NULL ? -1 : PySequence_Contains(wanted, key);
            Py_XDECREF(key);
        }
        if (call > 0) {
            PyObject *call_args[2] = {topic, partition};
            value = PyObject_Vectorcall(on_append, call_args, 2, NULL);
            call = value == NULL ? -1 : 1;
            Py_CLEAR(value);
        }
        Py_XDECREF(wanted);
        Py_XDECREF(partition);
        Py_XDECREF(topic);
        if (call < 0) {
            Py_DECREF(on_append);
            goto error_base;
        }
    }
    Py_DECREF(on_append);
    if (pid >= 0) {
        PyObject *record_args[4] = {state, header, base, Py_True};
        value = PyObject_Vectorcall(record_batch, record_args, 4, NULL);
        if (value == NULL)
            goto error_base;
        Py_CLEAR(value);
    }
    PyObject *last = PyLong_FromLongLong(last_offset);
    if (last == NULL)
        goto error_base;
    /* As append_batch builds it: tuple.__new__(AppendResult, (...)). */
    result = ((PyTypeObject *)append_result_type)->tp_alloc((PyTypeObject *)append_result_type, 4);
    if (result == NULL) {
        Py_DECREF(last);
        goto error_base;
    }
    PyTuple_SET_ITEM(result, 0, base);
    PyTuple_SET_ITEM(result, 1, last);
    PyTuple_SET_ITEM(result, 2, Py_NewRef(Py_False));
    PyTuple_SET_ITEM(result, 3, PyLong_FromLong(-1));  /* a cached small int: cannot fail */
    goto done;
error_base:
    Py_DECREF(base);
    goto error;
not_mine:
    result = Py_NewRef(Py_None);
    goto done;
error:
    result = NULL;
done:
    Py_XDECREF(value);
    Py_XDECREF(fd_obj);
    Py_XDECREF(config);
    Py_XDECREF(active);
    Py_XDECREF(segments);
    Py_XDECREF(state);
    return result;
}

static PyMethodDef methods[] = {
    {"append_common", (PyCFunction)(void (*)(void))append_common, METH_FASTCALL,
     "append_common(log, records, header) -> AppendResult, or None when the append is not the common one"},
    {"set_callables", (PyCFunction)(void (*)(void))set_callables, METH_FASTCALL,
     "set_callables(AppendResult, write_batch, record_batch, KafkaError, code, touch_open)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_common_append", NULL, -1, methods};

PyMODINIT_FUNC PyInit__common_append(void)
{
    struct {
        PyObject **slot;
        const char *name;
    } names[] = {
        {&s_producer_state, "producer_state"}, {&s_producers, "producers"}, {&s_epoch, "epoch"},
        {&s_batches, "batches"}, {&s_current_txn_first_offset, "current_txn_first_offset"},
        {&s_segments, "_segments"}, {&s_size, "size"}, {&s_config, "config"}, {&s_segment_bytes, "segment_bytes"},
        {&s_segment_ms, "segment_ms"}, {&s_first_timestamp, "first_timestamp"}, {&s_write_check, "write_check"},
        {&s_fd, "_fd"}, {&s_pooled, "_pooled"}, {&s_index_interval_bytes, "index_interval_bytes"},
        {&s_bytes_since_index_entry, "bytes_since_index_entry"}, {&s_max_timestamp, "_max_timestamp"},
        {&s_leader_epoch, "leader_epoch"}, {&s_log_path, "log_path"}, {&s_log_end_offset, "log_end_offset"},
        {&s_unflushed_messages, "unflushed_messages"}, {&s_flush_messages, "flush_messages"}, {&s_flush, "flush"},
        {&s_on_append, "on_append"}, {&s_appends_wanted, "appends_wanted"}, {&s_topic, "topic"},
        {&s_partition, "partition"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        *names[i].slot = PyUnicode_InternFromString(names[i].name);
        if (*names[i].slot == NULL)
            return NULL;
    }
    return PyModule_Create(&module);
}
