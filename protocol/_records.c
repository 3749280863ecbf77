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
 *
 * accept_produced(batch, max_message_bytes, segment_bytes, keys_required,
 * check_timestamps, before_max_ms, after_max_ms) is the Produce handler's check of a
 * partition's batch in one call: the header checks of batch.validate_produced_batch
 * (lengths, magic, max.message.bytes, CRC-32C, Kafka's LogValidator rules), segment.bytes,
 * message.timestamp.before/after.max.ms against the wall clock, and, uncompressed, the
 * record walk (with keys_required, no record may lack a key). It answers the parsed
 * BatchHeader when every check passes, None when any fails or cannot be decided here:
 * the caller then takes the Python path (broker/handlers/produce.py's reference), which
 * says which rule with Kafka's message. records.accept_produced_in_python is its twin,
 * built from the Python checks; tests/unit/test_produced_batch_check.py holds the two
 * to the same answers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define HAVE_SSE42_CRC 1
#endif

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

/* --- the produced batch's check ---------------------------------------------------- */

/* CRC-32C (Castagnoli), as the crc32c package computes it: the SSE 4.2 instruction where
 * the processor has it, else a table a byte at a time. */
static uint32_t crc_table[256];
static int have_sse42 = 0;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
#ifdef HAVE_SSE42_CRC
    __builtin_cpu_init();
    have_sse42 = __builtin_cpu_supports("sse4.2");
#endif
}

#ifdef HAVE_SSE42_CRC
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const unsigned char *p, size_t n)
{
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
        p += 8;
        n -= 8;
    }
    crc = (uint32_t)c;
    while (n--)
        crc = _mm_crc32_u8(crc, *p++);
    return crc;
}
#endif

static uint32_t crc32c_table(const unsigned char *p, size_t n)
{
    uint32_t crc = 0xFFFFFFFFu;
    while (n--)
        crc = crc_table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

static uint32_t crc32c(const unsigned char *p, size_t n)
{
#ifdef HAVE_SSE42_CRC
    if (have_sse42)
        return crc32c_sse42(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
#endif
    return crc32c_table(p, n);
}

static inline uint64_t be_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static inline uint32_t be_u32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline int16_t be_i16(const unsigned char *p) { return (int16_t)(uint16_t)((unsigned)p[0] << 8 | p[1]); }

/* The layout of protocol/batch.py's HEADER. */
#define HEADER_SIZE 61
#define LOG_OVERHEAD 12
/* Above this size the CRC and the walk run with the GIL released (worker threads then
 * go on); below it releasing it costs more than it frees. */
#define RELEASE_GIL_BYTES (64 * 1024)

static PyTypeObject *header_type = NULL; /* protocol.batch.BatchHeader, set at import */

static PyObject *set_header_type(PyObject *self, PyObject *type)
{
    if (!PyType_Check(type) || !PyType_IsSubtype((PyTypeObject *)type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "the header type must be a tuple subclass");
        return NULL;
    }
    Py_INCREF(type);
    Py_XSETREF(header_type, (PyTypeObject *)type);
    Py_RETURN_NONE;
}

/* Whether `timestamp` lies within [now - before, now + after], the differences taken
 * without overflow (the bounds default to Long.MAX_VALUE). -1 is no timestamp. */
static inline int timestamp_within(int64_t timestamp, int64_t now, int64_t before, int64_t after)
{
    if (timestamp == -1)
        return 1;
    if (timestamp < now)
        return (uint64_t)now - (uint64_t)timestamp <= (uint64_t)before;
    return (uint64_t)timestamp - (uint64_t)now <= (uint64_t)after;
}

/* The header as a BatchHeader, or NULL with an exception set. */
static PyObject *build_header(const unsigned char *p)
{
    PyObject *header = header_type->tp_alloc(header_type, 13);
    if (header == NULL)
        return NULL;
    PyObject *fields[13] = {
        PyLong_FromLongLong((long long)be_u64(p)),
        PyLong_FromLong((long)(int32_t)be_u32(p + 8)),
        PyLong_FromLong((long)(int32_t)be_u32(p + 12)),
        PyLong_FromLong((long)(signed char)p[16]),
        PyLong_FromUnsignedLong((unsigned long)be_u32(p + 17)),
        PyLong_FromLong((long)be_i16(p + 21)),
        PyLong_FromLong((long)(int32_t)be_u32(p + 23)),
        PyLong_FromLongLong((long long)be_u64(p + 27)),
        PyLong_FromLongLong((long long)be_u64(p + 35)),
        PyLong_FromLongLong((long long)be_u64(p + 43)),
        PyLong_FromLong((long)be_i16(p + 51)),
        PyLong_FromLong((long)(int32_t)be_u32(p + 53)),
        PyLong_FromLong((long)(int32_t)be_u32(p + 57)),
    };
    int failed = 0;
    for (int i = 0; i < 13; i++) {
        if (fields[i] == NULL)
            failed = 1;
        PyTuple_SET_ITEM(header, i, fields[i] ? fields[i] : Py_NewRef(Py_None));
    }
    if (failed) {
        Py_DECREF(header);
        return NULL;
    }
    return header;
}

/* An int argument as int64, or 0 (with *ok cleared and no exception left) if it is
 * not an int or does not fit: the caller then answers None. */
static int64_t int64_argument(PyObject *value, int *ok)
{
    if (!PyLong_Check(value)) {
        *ok = 0;
        return 0;
    }
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        *ok = 0;
    }
    return (int64_t)v;
}

static PyObject *accept_produced(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "accept_produced takes 7 arguments");
        return NULL;
    }
    if (header_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "set_header_type was not called");
        return NULL;
    }
    int ok = 1;
    int64_t max_message_bytes = int64_argument(args[1], &ok);
    int64_t segment_bytes = int64_argument(args[2], &ok);
    int keys_required = PyObject_IsTrue(args[3]);
    int check_timestamps = PyObject_IsTrue(args[4]);
    int64_t before = int64_argument(args[5], &ok);
    int64_t after = int64_argument(args[6], &ok);
    if (keys_required < 0 || check_timestamps < 0)
        return NULL;
    if (!ok || before < 0 || after < 0)
        Py_RETURN_NONE; /* a bound C cannot hold: the Python path decides */
    if (args[0] == Py_None)
        Py_RETURN_NONE;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *p = (const unsigned char *)view.buf;
    Py_ssize_t size = view.len;
    PyObject *answer = NULL;
    /* The header, as validate_produced_batch checks it. */
    if (size < HEADER_SIZE || (int64_t)(int32_t)be_u32(p + 8) + LOG_OVERHEAD != (int64_t)size || p[16] != 2
        || (int64_t)size > max_message_bytes || (int64_t)size > segment_bytes)
        goto refused;
    int32_t record_count = (int32_t)be_u32(p + 57);
    int16_t attributes = be_i16(p + 21);
    int64_t producer_id = (int64_t)be_u64(p + 43);
    int compression = attributes & 0x07;
    if (record_count <= 0 || (int32_t)be_u32(p + 23) != record_count - 1 || (attributes & 0x20)
        || (producer_id >= 0 && (int32_t)be_u32(p + 53) < 0) || compression > 4)
        goto refused;
    if (check_timestamps) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        if (!timestamp_within((int64_t)be_u64(p + 27), now, before, after)
            || !timestamp_within((int64_t)be_u64(p + 35), now, before, after))
            goto refused;
    }
    uint32_t crc = 0;
    Py_ssize_t null_keys = 0;
    if (size >= RELEASE_GIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        crc = crc32c(p + 21, (size_t)(size - 21));
        if (crc == be_u32(p + 17) && compression == 0)
            null_keys = walk_records(p + HEADER_SIZE, p + size, record_count, NULL, 0);
        Py_END_ALLOW_THREADS
    } else {
        crc = crc32c(p + 21, (size_t)(size - 21));
        if (crc == be_u32(p + 17) && compression == 0)
            null_keys = walk_records(p + HEADER_SIZE, p + size, record_count, NULL, 0);
    }
    if (crc != be_u32(p + 17) || null_keys < 0 || (keys_required && null_keys > 0))
        goto refused;
    answer = build_header(p);
    PyBuffer_Release(&view);
    return answer;
refused:
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

/* crc32c(buffer, table=False): for the tests, which compare both ways of computing it
 * with the crc32c package's. */
static PyObject *crc32c_function(PyObject *self, PyObject *args)
{
    Py_buffer view;
    int table = 0;
    if (!PyArg_ParseTuple(args, "y*|p", &view, &table))
        return NULL;
    const unsigned char *p = (const unsigned char *)view.buf;
    uint32_t crc = table ? crc32c_table(p, (size_t)view.len) : crc32c(p, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS,
     "walk(buffer, pos, end, count) -> -1 if the records are invalid, else how many have a null key"},
    {"walk_listing", walk_listing, METH_VARARGS,
     "walk_listing(buffer, pos, end, count, limit) -> (walk's answer, indexes of the first `limit` null keys)"},
    {"keys_and_values", keys_and_values, METH_VARARGS,
     "keys_and_values(buffer, pos, end, count) -> [(offset delta, key, value), ...] or None if malformed"},
    {"accept_produced", (PyCFunction)(void (*)(void))accept_produced, METH_FASTCALL,
     "accept_produced(batch, max_message_bytes, segment_bytes, keys_required, check_timestamps, before_max_ms, "
     "after_max_ms) -> the BatchHeader if the Produce handler's checks all pass, else None"},
    {"set_header_type", set_header_type, METH_O, "set_header_type(BatchHeader): the class accept_produced answers"},
    {"crc32c", crc32c_function, METH_VARARGS,
     "crc32c(buffer, table=False) -> the CRC-32C of its bytes, computed as accept_produced does or by the table"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_records", NULL, -1, methods};

PyMODINIT_FUNC PyInit__records(void)
{
    crc_init();
    return PyModule_Create(&module);
}
