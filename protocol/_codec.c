/* The request path of protocol/codec.py in C: the request header, the length check and
 * the decoding of a request body, and the encoding of a response. codec.py stays the
 * reference; the unit tests (tests/unit/test_compiled_codec.py, test_compiled_decode.py)
 * run both over every API and version and compare bytes, decoded values and refusals.
 *
 * configure(flexible, header_type, malformed, length_error, decode_plan) is called once
 * by protocol/codec.py: `flexible(api_key, version)` says whether a request version uses
 * header v2 (asked once per pair, then cached here), `header_type` is
 * codec.RequestHeader (a named tuple, built here without a Python call), the two
 * exception classes are codec.MalformedRequest and request_bounds.LengthError, and
 * `decode_plan(cls)` is compiled_codec.decode_plan (asked once per class).
 *
 * parse_header(frame) -> RequestHeader, as codec.parse_request_header.
 * check_body(plan, frame, offset) -> offset after the body, as
 *   request_bounds.check_request_body: walks the same plan (request_bounds._plan) and
 *   refuses exactly what it refuses. The Python walk reads up to the end of the frame and
 *   checks its `end` after each entity; every byte it reads past `end` makes that check
 *   fail, so checking every read against `end` here refuses the same inputs.
 * decode(cls, frame, offset) -> the request entity, as codec.decode_request_in_python
 *   reads it (the length check, then kio's reader), in one pass over the plan of
 *   compiled_codec.decode_plan(cls); or None where that path is to read it (a class
 *   without a plan, a tag the class does not declare, a writable buffer).
 * encode_response(correlation_id, flexible_header, plan, entity) -> chunks, as
 *   codec.encode_response: the size prefix, the response header and the body, one bytes
 *   object unless a bytes value of LARGE bytes or more (record data) is in it, which is
 *   passed on as its own chunk, uncopied, as is a records value that is not a buffer
 *   (a storage.FileSlice, which the connection sends from its file). The plan (compiled_codec.encode_plan) lists
 *   the fields of a kio class and how each is written (compiled_writers.py says how).
 * build(plan, values) -> entity, as entities.compiled_builder(cls)(values): a response
 *   entity from a handler's version-agnostic dict (entities.build_plan), its slots set
 *   directly as object.__setattr__ sets them in the dataclass's __init__ (kio's classes
 *   are frozen, slotted and have no __post_init__). member_offset(cls, name) gives the
 *   slots' places.
 * accept_file_chunks(cls): the one type besides buffers a bytes or records value may
 *   hold, passed on as a chunk of its own: storage.FileSlice, which storage/file_slice.py
 *   names here (protocol imports nothing of storage). Any other value that is not a
 *   buffer is a handler's bug: TypeError at once, not a failure later in the write.
 * error_codes(plan, entity) -> the error codes other than NONE in a response, as
 *   broker/metrics.py's _count_errors finds them (its plan, with nested plans in place of
 *   the nested classes), or None: the metrics of every request served.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <datetime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define LARGE 4096
#define HUGE_VARINT ((uint64_t)INT64_MAX)

static PyObject *flexible_lookup, *header_type, *malformed_error, *length_error, *struct_error;
/* compiled_codec.decode_plan, and what it gave for each request class: {cls: plan or None} */
static PyObject *decode_plan_of, *decode_plans;
/* storage.FileSlice, once accept_file_chunks named it */
static PyObject *file_chunk_type;

/* A big-endian unsigned integer of `size` bytes (Kafka's fixed-size fields); the caller
 * casts it to the signed type it reads. */
static inline uint64_t big_endian(const unsigned char *p, int size)
{
    uint64_t value = 0;
    for (int i = 0; i < size; i++)
        value = (value << 8) | p[i];
    return value;
}

/* -1 unknown, 0 not flexible, 1 flexible, for api keys 0..255 and versions 0..63. */
static signed char flexible_cache[256][64];

/* --- reading ----------------------------------------------------------------------- */

/* An unsigned varint of at most 10 bytes before end, as varint.read_uvarint reads it;
 * a value beyond int64 is saturated to HUGE_VARINT (larger than any length that fits).
 * 0: read; -1: truncated; -2: longer than 64 bits. */
static int read_uvarint(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, uint64_t *out)
{
    uint64_t value = 0;
    int shift = 0, big = 0;
    Py_ssize_t p = *pos;
    for (;;) {
        if (p >= end)
            return -1;
        unsigned char b = buf[p++];
        uint64_t bits = b & 0x7F;
        if (shift > 0 && (bits >> (64 - shift)))
            big = 1;
        value |= bits << shift;
        if (!(b & 0x80))
            break;
        shift += 7;
        if (shift > 63)
            return -2;
    }
    *pos = p;
    *out = (big || value > HUGE_VARINT) ? HUGE_VARINT : value;
    return 0;
}

static int is_flexible(int api_key, int version)
{
    if (api_key >= 0 && api_key < 256 && version >= 0 && version < 64 && flexible_cache[api_key][version] >= 0)
        return flexible_cache[api_key][version];
    PyObject *answer = PyObject_CallFunction(flexible_lookup, "ii", api_key, version);
    if (answer == NULL)
        return -1;
    int flexible = PyObject_IsTrue(answer);
    Py_DECREF(answer);
    if (flexible >= 0 && api_key >= 0 && api_key < 256 && version >= 0 && version < 64)
        flexible_cache[api_key][version] = (signed char)flexible;
    return flexible;
}

static PyObject *configure(PyObject *self, PyObject *args)
{
    PyObject *lookup, *type, *malformed, *length, *plan_of;
    if (!PyArg_ParseTuple(args, "OOOOO", &lookup, &type, &malformed, &length, &plan_of))
        return NULL;
    /* the header is built as tuple_subtype_new builds a named tuple: allocated, then filled */
    if (!PyType_Check(type) || !PyType_IsSubtype((PyTypeObject *)type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "the header type must be a named tuple");
        return NULL;
    }
    Py_XSETREF(flexible_lookup, Py_NewRef(lookup));
    Py_XSETREF(header_type, Py_NewRef(type));
    Py_XSETREF(malformed_error, Py_NewRef(malformed));
    Py_XSETREF(length_error, Py_NewRef(length));
    Py_XSETREF(decode_plan_of, Py_NewRef(plan_of));
    Py_XSETREF(decode_plans, PyDict_New());
    if (decode_plans == NULL)
        return NULL;
    memset(flexible_cache, -1, sizeof flexible_cache);
    Py_RETURN_NONE;
}

static int configured(void)
{
    if (header_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_codec.configure was not called");
        return 0;
    }
    return 1;
}

static PyObject *parse_header(PyObject *self, PyObject *frame)
{
    if (!configured())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *p = view.buf;
    Py_ssize_t len = view.len, offset = 10;
    PyObject *client_id = NULL, *header = NULL;
    if (len < 10) {
        PyErr_Format(malformed_error, "request header needs 10 bytes, got %zd", len);
        goto done;
    }
    int api_key = (int16_t)big_endian(p, 2);
    int version = (int16_t)big_endian(p + 2, 2);
    int32_t correlation_id = (int32_t)big_endian(p + 4, 4);
    int client_len = (int16_t)big_endian(p + 8, 2);
    if (client_len >= 0) {
        if (offset + client_len > len) {
            PyErr_SetString(malformed_error, "client id runs past the frame");
            goto done;
        }
        client_id = PyUnicode_DecodeUTF8((const char *)p + offset, client_len, "replace");
        if (client_id == NULL)
            goto done;
        offset += client_len;
    } else {
        client_id = Py_NewRef(Py_None);
    }
    int flexible = is_flexible(api_key, version);
    if (flexible < 0)
        goto done;
    if (flexible) {
        uint64_t count, tag, size;
        int bad = read_uvarint(p, len, &offset, &count);
        for (uint64_t i = 0; !bad && i < count; i++) {
            bad = read_uvarint(p, len, &offset, &tag);
            if (!bad)
                bad = read_uvarint(p, len, &offset, &size);
            if (!bad && size > (uint64_t)(len - offset))
                bad = 1; /* past the frame */
            if (!bad)
                offset += (Py_ssize_t)size;
        }
        if (bad) {
            PyErr_SetString(malformed_error, bad == 1    ? "truncated tagged fields"
                                             : bad == -1 ? "bad tagged fields: truncated varint"
                                                         : "bad tagged fields: varint longer than 64 bits");
            goto done;
        }
    }
    header = ((PyTypeObject *)header_type)->tp_alloc((PyTypeObject *)header_type, 5);
    if (header == NULL)
        goto done;
    PyTuple_SET_ITEM(header, 0, PyLong_FromLong(api_key));
    PyTuple_SET_ITEM(header, 1, PyLong_FromLong(version));
    PyTuple_SET_ITEM(header, 2, PyLong_FromLong(correlation_id));
    PyTuple_SET_ITEM(header, 3, client_id);
    client_id = NULL;
    PyTuple_SET_ITEM(header, 4, PyLong_FromSsize_t(offset));
    for (int i = 0; i < 5; i++) {
        if (PyTuple_GET_ITEM(header, i) == NULL) {
            Py_CLEAR(header);
            break;
        }
    }
done:
    Py_XDECREF(client_id);
    PyBuffer_Release(&view);
    return header;
}

/* --- the length check of a request body ---------------------------------------------- */

/* request_bounds' steps */
enum { C_SKIP = 0, C_STRING = 1, C_BYTES = 2, C_COMPACT = 3, C_ARRAY = 4, C_STRUCT = 5, C_TAGS = 6 };

#define TOO_DEEP 64

static int check_plan(PyObject *plan, const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, int depth);

static int length_fail(const char *message)
{
    PyErr_SetString(length_error, message);
    return -1;
}

static int check_uvarint(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, uint64_t *out)
{
    int bad = read_uvarint(buf, end, pos, out);
    if (bad)
        return length_fail(bad == -1 ? "bad varint: truncated varint" : "bad varint: varint longer than 64 bits");
    return 0;
}

/* request_bounds' messages, with the numbers they name */
static int too_long(uint64_t n, Py_ssize_t left)
{
    PyErr_Format(length_error, "a string or bytes of %llu bytes with %zd left", (unsigned long long)n, left);
    return -1;
}

static int check_step(PyObject *step, const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, int depth)
{
    long op = PyLong_AsLong(PyTuple_GET_ITEM(step, 0));
    PyObject *arg = PyTuple_GET_ITEM(step, 1);
    Py_ssize_t offset = *pos;
    uint64_t u;
    switch (op) {
    case C_SKIP:
        offset += PyLong_AsSsize_t(arg);
        if (offset > end)
            return length_fail("truncated");
        break;
    case C_COMPACT:
        if (check_uvarint(buf, end, &offset, &u) < 0)
            return -1;
        if (u > 1) {
            if (u - 1 > (uint64_t)(end - offset))
                return too_long(u - 1, end - offset);
            offset += (Py_ssize_t)(u - 1);
        }
        break;
    case C_STRING:
    case C_BYTES: {
        Py_ssize_t n;
        if (op == C_STRING) {
            if (end - offset < 2)
                return length_fail("truncated");
            n = (int16_t)big_endian(buf + offset, 2);
            offset += 2;
        } else {
            if (end - offset < 4)
                return length_fail("truncated");
            n = (int32_t)big_endian(buf + offset, 4);
            offset += 4;
        }
        if (n > 0) {
            if (n > end - offset)
                return too_long((uint64_t)n, end - offset);
            offset += n;
        }
        break;
    }
    case C_ARRAY: {
        int flexible = PyObject_IsTrue(PyTuple_GET_ITEM(arg, 0));
        PyObject *element = PyTuple_GET_ITEM(arg, 1);
        int nullable = PyObject_IsTrue(PyTuple_GET_ITEM(arg, 2));
        int64_t n;
        if (flexible) {
            if (check_uvarint(buf, end, &offset, &u) < 0)
                return -1;
            n = (int64_t)u - 1;
        } else {
            if (end - offset < 4)
                return length_fail("truncated");
            n = (int32_t)big_endian(buf + offset, 4);
            offset += 4;
        }
        if (!nullable && n < 0)
            return length_fail("null for an array that cannot be null");
        if (n > 0) {
            if (n > end - offset) {
                PyErr_Format(length_error, "an array of %lld elements with %zd bytes left", (long long)n,
                             end - offset);
                return -1;
            }
            if (PyLong_Check(element)) {
                /* n <= end - offset and the size is small: no overflow */
                offset += (Py_ssize_t)n * PyLong_AsSsize_t(element);
                if (offset > end)
                    return length_fail("the body runs past the frame");
            } else {
                for (int64_t i = 0; i < n; i++) {
                    if (check_plan(element, buf, &offset, end, depth + 1) < 0)
                        return -1;
                }
            }
        }
        break;
    }
    case C_STRUCT: {
        int nullable = PyObject_IsTrue(PyTuple_GET_ITEM(arg, 0));
        if (nullable) {
            if (offset >= end)
                return length_fail("truncated struct marker");
            offset += 1;
            if (buf[offset - 1] == 0xFF)
                break;
        }
        if (check_plan(PyTuple_GET_ITEM(arg, 1), buf, &offset, end, depth + 1) < 0)
            return -1;
        break;
    }
    case C_TAGS: {
        if (offset >= end)
            return length_fail("truncated");
        if (buf[offset] == 0) {
            offset += 1;
            break;
        }
        uint64_t count, tag, size;
        if (check_uvarint(buf, end, &offset, &count) < 0)
            return -1;
        if (count > (uint64_t)(end - offset)) {
            PyErr_Format(length_error, "%llu tagged fields with %zd bytes left in the frame", (unsigned long long)count,
                         end - offset);
            return -1;
        }
        for (uint64_t i = 0; i < count; i++) {
            if (check_uvarint(buf, end, &offset, &tag) < 0 || check_uvarint(buf, end, &offset, &size) < 0)
                return -1;
            if (size > (uint64_t)(end - offset)) {
                PyErr_Format(length_error, "a tagged field of %llu bytes with %zd left in the frame",
                             (unsigned long long)size, end - offset);
                return -1;
            }
            if (tag <= (uint64_t)LONG_MAX) {
                PyObject *key = PyLong_FromUnsignedLongLong(tag);
                if (key == NULL)
                    return -1;
                PyObject *known = PyDict_GetItemWithError(arg, key);
                Py_DECREF(key);
                if (known == NULL && PyErr_Occurred())
                    return -1;
                if (known != NULL) {
                    Py_ssize_t inner = offset;
                    if (check_plan(known, buf, &inner, offset + (Py_ssize_t)size, depth + 1) < 0)
                        return -1;
                    if (inner != offset + (Py_ssize_t)size) {
                        PyErr_Format(length_error, "a tagged field of %llu bytes whose value is shorter",
                                     (unsigned long long)size);
                        return -1;
                    }
                }
            }
            offset += (Py_ssize_t)size;
        }
        break;
    }
    default:
        PyErr_Format(PyExc_SystemError, "unknown check step %ld", op);
        return -1;
    }
    *pos = offset;
    return 0;
}

static int check_plan(PyObject *plan, const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, int depth)
{
    if (depth > TOO_DEEP) {
        PyErr_SetString(PyExc_RecursionError, "request plan nested too deep");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(plan);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (check_step(PyTuple_GET_ITEM(plan, i), buf, pos, end, depth) < 0)
            return -1;
    }
    if (*pos > end)
        return length_fail("the body runs past the frame");
    return 0;
}

static PyObject *check_body(PyObject *self, PyObject *args)
{
    PyObject *plan, *frame;
    Py_ssize_t offset;
    if (!configured() || !PyArg_ParseTuple(args, "O!On", &PyTuple_Type, &plan, &frame, &offset))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    int failed = offset < 0 || offset > view.len;
    if (failed)
        length_fail("truncated");
    else
        failed = check_plan(plan, view.buf, &offset, view.len, 0) < 0;
    PyBuffer_Release(&view);
    return failed ? NULL : PyLong_FromSsize_t(offset);
}

/* --- decoding a request body ----------------------------------------------------------- */

/* compiled_codec's decode steps: (op, slot offset (-1 for an array's element), argument,
 * argument). A plan: (cls, flexible, steps, {tag: step} or None, ((slot offset, default
 * of a tagged field), ...)).
 *
 * One pass does what codec.decode_request_in_python does in two: every length and count
 * is checked as request_bounds checks it (refused where it refuses), and every value is
 * read as kio's reader reads it (refused where kio refuses, the same Python type where it
 * reads one). A refusal is codec.MalformedRequest, or the ValueError, OverflowError...
 * of a Python call (ErrorCode, kio's datetime) that decode_request turns into one. */
enum {
    D_FIXED = 0,      /* (0, offset, code, None) code: one of bhiqBHIQd? */
    D_STRING = 1,     /* (1, offset, nullable, None) */
    D_BYTES = 2,      /* (2, offset, nullable, None): bytes and records, read as bytes */
    D_UUID = 3,       /* (3, offset, uuid.UUID, SafeUUID.unknown): all zeros read as None */
    D_ERROR_CODE = 4, /* (4, offset, ErrorCode, None) */
    D_TIMEDELTA = 5,  /* (5, offset, size 4 or 8, None): milliseconds */
    D_DATETIME = 6,   /* (6, offset, nullable, kio's tz_aware_from_i64) */
    D_STRUCT = 7,     /* (7, offset, nullable, plan) */
    D_ARRAY = 8,      /* (8, offset, nullable, element step) */
    D_ENTITIES = 9,   /* (9, offset, nullable, plan) */
};

/* What one decode needs besides its position; `fallback` is set where the decoder leaves
 * the request to the Python path. */
typedef struct {
    const unsigned char *buf;
    int fallback;
} Decoder;

static PyObject *uuid_int_name, *uuid_is_safe_name;

static PyObject *malformed(const char *message)
{
    PyErr_SetString(malformed_error, message);
    return NULL;
}

/* An unsigned varint as kio reads one: at most 5 bytes, its value up to 35 bits. */
static int decode_uvarint(Decoder *d, Py_ssize_t end, Py_ssize_t *pos, uint64_t *out)
{
    uint64_t value = 0;
    Py_ssize_t p = *pos;
    for (int i = 0;; i++) {
        if (i == 5) {
            malformed("a varint longer than 5 bytes");
            return -1;
        }
        if (p >= end) {
            malformed("truncated varint");
            return -1;
        }
        unsigned char b = d->buf[p++];
        value |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80))
            break;
    }
    *pos = p;
    *out = value;
    return 0;
}

/* A length or count: a compact one (uvarint, minus one; -1 for null) where flexible, else a
 * legacy int16 or int32. */
static int decode_length(Decoder *d, int flexible, int legacy_size, Py_ssize_t end, Py_ssize_t *pos, int64_t *out)
{
    if (flexible) {
        uint64_t u;
        if (decode_uvarint(d, end, pos, &u) < 0)
            return -1;
        *out = (int64_t)u - 1;
        return 0;
    }
    if (end - *pos < legacy_size) {
        malformed("truncated");
        return -1;
    }
    uint64_t raw = big_endian(d->buf + *pos, legacy_size);
    *out = legacy_size == 2 ? (int64_t)(int16_t)raw : (int64_t)(int32_t)raw;
    *pos += legacy_size;
    return 0;
}

/* timedelta(milliseconds=ms) as kio makes it, without the Python call. kio counts in
 * microseconds in an int64 and refuses (ValueError) a duration that overflows it. */
static PyObject *timedelta_of(int64_t ms)
{
    if (ms > INT64_MAX / 1000 || ms < -(INT64_MAX / 1000)) {
        PyErr_SetString(PyExc_ValueError, "timedelta milliseconds overflow");
        return NULL;
    }
    int64_t days = ms / 86400000, rest = ms % 86400000;
    if (rest < 0) {
        rest += 86400000;
        days -= 1;
    }
    /* |days| < 106,751,992 here: within an int and timedelta's range */
    return PyDelta_FromDSU((int)days, (int)(rest / 1000), (int)(rest % 1000) * 1000);
}

/* uuid.UUID(bytes=...) without its __init__: its two slots set as that __init__ sets them. */
static PyObject *uuid_of(PyObject *step, const unsigned char *raw)
{
    PyTypeObject *type = (PyTypeObject *)PyTuple_GET_ITEM(step, 2);
    /* _PyLong_FromByteArray: int.from_bytes(raw, "big"), as UUID's __init__ computes it */
    PyObject *value = _PyLong_FromByteArray(raw, 16, 0, 0);
    if (value == NULL)
        return NULL;
    PyObject *uuid = type->tp_alloc(type, 0);
    if (uuid == NULL || PyObject_GenericSetAttr(uuid, uuid_int_name, value) < 0
        || PyObject_GenericSetAttr(uuid, uuid_is_safe_name, PyTuple_GET_ITEM(step, 3)) < 0)
        Py_CLEAR(uuid);
    Py_DECREF(value);
    return uuid;
}

static PyObject *decode_entity(Decoder *d, PyObject *plan, Py_ssize_t *pos, Py_ssize_t end, int depth);

/* A string or bytes: NULL with MalformedRequest for a null where none may be, a negative
 * legacy length other than -1, a length past `end`, or invalid UTF-8 (UnicodeDecodeError). */
static PyObject *decode_text(Decoder *d, int is_string, int nullable, int flexible, Py_ssize_t *pos, Py_ssize_t end)
{
    int64_t n;
    if (decode_length(d, flexible, is_string ? 2 : 4, end, pos, &n) < 0)
        return NULL;
    if (n == -1) {
        if (!nullable)
            return malformed("null for a string or bytes that cannot be null");
        return Py_NewRef(Py_None);
    }
    if (n < 0)
        return malformed("a negative length");
    if (n > end - *pos) {
        PyErr_Format(malformed_error, "a string or bytes of %lld bytes with %zd left", (long long)n, end - *pos);
        return NULL;
    }
    const char *start = (const char *)d->buf + *pos;
    *pos += (Py_ssize_t)n;
    if (is_string)
        return PyUnicode_DecodeUTF8(start, (Py_ssize_t)n, NULL);
    return PyBytes_FromStringAndSize(start, (Py_ssize_t)n);
}

static PyObject *decode_value(Decoder *d, PyObject *step, int flexible, Py_ssize_t *pos, Py_ssize_t end, int depth)
{
    long op = PyLong_AsLong(PyTuple_GET_ITEM(step, 0));
    PyObject *arg = PyTuple_GET_ITEM(step, 2);
    const unsigned char *p = d->buf + *pos;
    Py_ssize_t left = end - *pos;
    switch (op) {
    case D_FIXED: {
        int code = (int)PyLong_AsLong(arg);
        int size = code == 'b' || code == 'B' || code == '?' ? 1
                   : code == 'h' || code == 'H'              ? 2
                   : code == 'i' || code == 'I'              ? 4
                                                             : 8;
        if (left < size)
            return malformed("truncated");
        uint64_t raw = big_endian(p, size);
        *pos += size;
        switch (code) {
        case 'b': return PyLong_FromLong((int8_t)raw);
        case 'h': return PyLong_FromLong((int16_t)raw);
        case 'i': return PyLong_FromLong((int32_t)raw);
        case 'q': return PyLong_FromLongLong((int64_t)raw);
        case 'B': case 'H': case 'I': case 'Q': return PyLong_FromUnsignedLongLong(raw);
        case 'd': {
            double value;
            memcpy(&value, &raw, 8);
            return PyFloat_FromDouble(value);
        }
        case '?':
            /* kio takes 0 and 1 only */
            if (raw > 1) {
                PyErr_SetString(PyExc_ValueError, "Invalid boolean value");
                return NULL;
            }
            return Py_NewRef(raw ? Py_True : Py_False);
        default:
            PyErr_Format(PyExc_SystemError, "unknown fixed code %c", code);
            return NULL;
        }
    }
    case D_STRING:
    case D_BYTES:
        return decode_text(d, op == D_STRING, arg == Py_True, flexible, pos, end);
    case D_UUID:
        if (left < 16)
            return malformed("truncated");
        *pos += 16;
        for (int i = 0; i < 16; i++) {
            if (p[i])
                return uuid_of(step, p);
        }
        return Py_NewRef(Py_None); /* kio reads the zero uuid as None */
    case D_ERROR_CODE:
        if (left < 2)
            return malformed("truncated");
        *pos += 2;
        return PyObject_CallFunction(arg, "i", (int)(int16_t)big_endian(p, 2));
    case D_TIMEDELTA: {
        int size = (int)PyLong_AsLong(arg);
        if (left < size)
            return malformed("truncated");
        *pos += size;
        uint64_t raw = big_endian(p, size);
        return timedelta_of(size == 4 ? (int64_t)(int32_t)raw : (int64_t)raw);
    }
    case D_DATETIME: {
        if (left < 8)
            return malformed("truncated");
        *pos += 8;
        int64_t ms = (int64_t)big_endian(p, 8);
        if (ms == -1 && arg == Py_True)
            return Py_NewRef(Py_None);
        if (ms < 0)
            return malformed("a negative timestamp");
        return PyObject_CallFunction(PyTuple_GET_ITEM(step, 3), "L", (long long)ms);
    }
    case D_STRUCT: {
        if (arg == Py_True) { /* KIP-893 nullable struct: an int8 marker, -1 for null */
            if (left < 1)
                return malformed("truncated struct marker");
            *pos += 1;
            if (p[0] == 0xFF)
                return Py_NewRef(Py_None);
        }
        return decode_entity(d, PyTuple_GET_ITEM(step, 3), pos, end, depth + 1);
    }
    case D_ARRAY:
    case D_ENTITIES: {
        int64_t n;
        if (decode_length(d, flexible, 4, end, pos, &n) < 0)
            return NULL;
        if (n < 0) {
            /* null: where the schema allows it (request_bounds), and -1 only (kio) */
            if (n == -1 && arg == Py_True)
                return Py_NewRef(Py_None);
            return malformed(n == -1 ? "null for an array that cannot be null" : "a negative array length");
        }
        /* every element takes at least one byte: a count beyond the bytes left is a lie */
        if (n > end - *pos) {
            PyErr_Format(malformed_error, "an array of %lld elements with %zd bytes left", (long long)n, end - *pos);
            return NULL;
        }
        PyObject *inner = PyTuple_GET_ITEM(step, 3);
        PyObject *items = PyTuple_New((Py_ssize_t)n);
        for (Py_ssize_t i = 0; items != NULL && i < (Py_ssize_t)n; i++) {
            PyObject *item = op == D_ENTITIES ? decode_entity(d, inner, pos, end, depth + 1)
                                              : decode_value(d, inner, flexible, pos, end, depth + 1);
            if (item == NULL)
                Py_CLEAR(items);
            else
                PyTuple_SET_ITEM(items, i, item);
        }
        return items;
    }
    default:
        PyErr_Format(PyExc_SystemError, "unknown decode step %ld", op);
        return NULL;
    }
}

static inline void set_slot(PyObject *entity, PyObject *step_or_offset, PyObject *value)
{
    PyObject **slot = (PyObject **)((char *)entity + PyLong_AsSsize_t(step_or_offset));
    Py_XSETREF(*slot, value);
}

/* A flexible entity's tagged fields, after its defaults are set: each known tag's value
 * read into its slot (the last of a repeated tag wins, as in kio), and refused where it is
 * shorter than its size, as request_bounds refuses it. A tag the class does not declare
 * leaves the request to the Python path. */
static int decode_tags(Decoder *d, PyObject *tagged, PyObject *entity, Py_ssize_t *pos, Py_ssize_t end, int depth)
{
    if (*pos >= end) {
        malformed("truncated");
        return -1;
    }
    if (d->buf[*pos] == 0) { /* nearly always: no tagged field */
        *pos += 1;
        return 0;
    }
    uint64_t count, tag, size;
    if (decode_uvarint(d, end, pos, &count) < 0)
        return -1;
    if (count > (uint64_t)(end - *pos)) {
        PyErr_Format(malformed_error, "%llu tagged fields with %zd bytes left in the frame", (unsigned long long)count,
                     end - *pos);
        return -1;
    }
    for (uint64_t i = 0; i < count; i++) {
        if (decode_uvarint(d, end, pos, &tag) < 0 || decode_uvarint(d, end, pos, &size) < 0)
            return -1;
        if (size > (uint64_t)(end - *pos)) {
            PyErr_Format(malformed_error, "a tagged field of %llu bytes with %zd left in the frame",
                         (unsigned long long)size, end - *pos);
            return -1;
        }
        PyObject *key = PyLong_FromUnsignedLongLong(tag);
        if (key == NULL)
            return -1;
        PyObject *step = PyDict_GetItemWithError(tagged, key);
        Py_DECREF(key);
        if (step == NULL) {
            if (!PyErr_Occurred())
                d->fallback = 1;
            return -1;
        }
        Py_ssize_t value_end = *pos + (Py_ssize_t)size;
        PyObject *value = decode_value(d, step, 1, pos, value_end, depth + 1);
        if (value == NULL)
            return -1;
        set_slot(entity, PyTuple_GET_ITEM(step, 1), value);
        if (*pos != value_end) {
            PyErr_Format(malformed_error, "a tagged field of %llu bytes whose value is shorter",
                         (unsigned long long)size);
            return -1;
        }
    }
    return 0;
}

static PyObject *decode_entity(Decoder *d, PyObject *plan, Py_ssize_t *pos, Py_ssize_t end, int depth)
{
    if (depth > TOO_DEEP) {
        PyErr_SetString(PyExc_RecursionError, "request nested too deep");
        return NULL;
    }
    /* allocated, then its slots set, as build_entity does */
    PyTypeObject *type = (PyTypeObject *)PyTuple_GET_ITEM(plan, 0);
    int flexible = PyTuple_GET_ITEM(plan, 1) == Py_True;
    PyObject *steps = PyTuple_GET_ITEM(plan, 2);
    PyObject *entity = type->tp_alloc(type, 0);
    if (entity == NULL)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(steps);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *step = PyTuple_GET_ITEM(steps, i);
        PyObject *value = decode_value(d, step, flexible, pos, end, depth);
        if (value == NULL)
            goto fail;
        set_slot(entity, PyTuple_GET_ITEM(step, 1), value);
    }
    if (flexible) {
        PyObject *defaults = PyTuple_GET_ITEM(plan, 4);
        Py_ssize_t count = PyTuple_GET_SIZE(defaults);
        for (Py_ssize_t i = 0; i < count; i++) {
            PyObject *entry = PyTuple_GET_ITEM(defaults, i);
            set_slot(entity, PyTuple_GET_ITEM(entry, 0), Py_NewRef(PyTuple_GET_ITEM(entry, 1)));
        }
        if (decode_tags(d, PyTuple_GET_ITEM(plan, 3), entity, pos, end, depth) < 0)
            goto fail;
    }
    return entity;
fail:
    Py_DECREF(entity);
    return NULL;
}

/* The plan of request class `cls`, borrowed: asked of compiled_codec.decode_plan once. */
static PyObject *plan_of(PyObject *cls)
{
    PyObject *plan = PyDict_GetItemWithError(decode_plans, cls);
    if (plan != NULL || PyErr_Occurred())
        return plan;
    plan = PyObject_CallOneArg(decode_plan_of, cls);
    if (plan == NULL)
        return NULL;
    if (plan != Py_None && !PyTuple_Check(plan)) {
        Py_DECREF(plan);
        PyErr_SetString(PyExc_TypeError, "a decode plan is a tuple");
        return NULL;
    }
    int failed = PyDict_SetItem(decode_plans, cls, plan);
    Py_DECREF(plan); /* the dict holds it */
    return failed < 0 ? NULL : plan;
}

/* A fast call: this runs for every request. */
static PyObject *decode(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!configured())
        return NULL;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "decode(cls, frame, offset) takes 3 arguments");
        return NULL;
    }
    Py_ssize_t offset = PyLong_AsSsize_t(args[2]);
    if (offset == -1 && PyErr_Occurred())
        return NULL;
    PyObject *plan = plan_of(args[0]);
    if (plan == NULL)
        return NULL;
    if (plan == Py_None) /* a class kio's reader reads */
        Py_RETURN_NONE;
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *entity = NULL;
    if (!view.readonly) {
        /* kio refuses a writable buffer: the Python path answers that */
        entity = Py_NewRef(Py_None);
    } else if (offset < 0 || offset > view.len) {
        malformed("truncated");
    } else {
        Decoder d = {view.buf, 0};
        entity = decode_entity(&d, plan, &offset, view.len, 0);
        if (entity == NULL && d.fallback && !PyErr_Occurred())
            entity = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&view);
    return entity;
}

/* --- encoding a response ------------------------------------------------------------- */

/* compiled_codec's encode steps: (op, attribute name or None for the value itself, ...) */
enum {
    E_FIXED = 0,     /* (0, name, code) code: one of bhiqBHIQd? */
    E_CONVERT = 1,   /* (1, name, code, converter): converter(value) is packed */
    E_UUID = 2,      /* (2, name): 16 bytes, zeros for None */
    E_STRING = 3,    /* (3, name, optional) */
    E_BYTES = 4,     /* (4, name, optional): bytes and records */
    E_STRUCT = 5,    /* (5, name, optional, plan) */
    E_ARRAY = 6,     /* (6, name, item step: its name is None) */
    E_ENTITIES = 7,  /* (7, name, plan) */
    E_TAGS = 8,      /* (8, ((tag, name, skipped value, value step), ...)) */
    E_NO_TAGS = 9,   /* (9,): an empty tag section */
    E_DURATION = 10, /* (10, name, code, converter): as E_CONVERT, a timedelta converted here */
    E_OPTIONAL_TIMESTAMP = 11, /* (11, name, code, converter): as E_CONVERT, None written as -1 here */
};

typedef struct {
    char *data;
    Py_ssize_t len, cap;
    char small[1024];
    PyObject *chunks; /* the chunks so far, once a large piece was passed on; else NULL */
    Py_ssize_t total; /* bytes in chunks */
    int keep_large;   /* pass large bytes on as their own chunks */
} Writer;

static void writer_init(Writer *w, int keep_large)
{
    w->data = w->small;
    w->len = 0;
    w->cap = sizeof w->small;
    w->chunks = NULL;
    w->total = 0;
    w->keep_large = keep_large;
}

static void writer_free(Writer *w)
{
    if (w->data != w->small)
        PyMem_Free(w->data);
    Py_CLEAR(w->chunks);
}

static int reserve(Writer *w, Py_ssize_t more)
{
    if (w->len + more <= w->cap)
        return 0;
    Py_ssize_t cap = w->cap;
    while (cap < w->len + more)
        cap *= 2;
    char *data = PyMem_Malloc(cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(data, w->data, w->len);
    if (w->data != w->small)
        PyMem_Free(w->data);
    w->data = data;
    w->cap = cap;
    return 0;
}

static inline int put(Writer *w, const void *bytes, Py_ssize_t n)
{
    if (reserve(w, n) < 0)
        return -1;
    memcpy(w->data + w->len, bytes, n);
    w->len += n;
    return 0;
}

static inline int put_be(Writer *w, uint64_t value, int size)
{
    if (reserve(w, size) < 0)
        return -1;
    for (int i = size - 1; i >= 0; i--) {
        w->data[w->len + i] = (char)(value & 0xFF);
        value >>= 8;
    }
    w->len += size;
    return 0;
}

static int put_uvarint(Writer *w, uint64_t value)
{
    unsigned char out[10];
    int n = 0;
    while (value > 0x7F) {
        out[n++] = (unsigned char)((value & 0x7F) | 0x80);
        value >>= 7;
    }
    out[n++] = (unsigned char)value;
    return put(w, out, n);
}

/* The buffered bytes become a chunk of their own. */
static int flush(Writer *w)
{
    if (w->chunks == NULL && (w->chunks = PyList_New(0)) == NULL)
        return -1;
    if (w->len == 0)
        return 0;
    PyObject *chunk = PyBytes_FromStringAndSize(w->data, w->len);
    if (chunk == NULL)
        return -1;
    int failed = PyList_Append(w->chunks, chunk);
    Py_DECREF(chunk);
    w->total += w->len;
    w->len = 0;
    return failed;
}

static int pack_error(const char *format, const char *message)
{
    PyErr_Format(struct_error, format, message);
    return -1;
}

/* A fixed-size value, with struct.pack's range checks (and its struct.error). */
static int put_fixed(Writer *w, int code, PyObject *value)
{
    if (code == '?') {
        int truth = PyObject_IsTrue(value);
        if (truth < 0)
            return -1;
        return put_be(w, truth ? 1 : 0, 1);
    }
    if (code == 'd') {
        double d = PyFloat_AsDouble(value);
        if (d == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return pack_error("%s", "required argument is not a float");
        }
        uint64_t bits;
        memcpy(&bits, &d, 8);
        return put_be(w, bits, 8);
    }
    PyObject *index = PyNumber_Index(value);
    if (index == NULL) {
        PyErr_Clear();
        return pack_error("%s", "required argument is not an integer");
    }
    int size;
    int64_t low, high;
    switch (code) {
    case 'b': size = 1; low = INT8_MIN; high = INT8_MAX; break;
    case 'h': size = 2; low = INT16_MIN; high = INT16_MAX; break;
    case 'i': size = 4; low = INT32_MIN; high = INT32_MAX; break;
    case 'q': size = 8; low = INT64_MIN; high = INT64_MAX; break;
    case 'B': size = 1; low = 0; high = UINT8_MAX; break;
    case 'H': size = 2; low = 0; high = UINT16_MAX; break;
    case 'I': size = 4; low = 0; high = UINT32_MAX; break;
    case 'Q': {
        unsigned long long u = PyLong_AsUnsignedLongLong(index);
        Py_DECREF(index);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return pack_error("%s", "argument out of range");
        }
        return put_be(w, u, 8);
    }
    default:
        Py_DECREF(index);
        PyErr_Format(PyExc_SystemError, "unknown fixed code %c", code);
        return -1;
    }
    int overflow;
    long long n = PyLong_AsLongLongAndOverflow(index, &overflow);
    Py_DECREF(index);
    if (n == -1 && PyErr_Occurred())
        return -1;
    if (overflow || n < low || n > high)
        return pack_error("%s", "argument out of range");
    return put_be(w, (uint64_t)n, size);
}

static int encode_plan(Writer *w, PyObject *plan, PyObject *entity, int depth);

/* A length prefix: a compact varint of length + 1, or a legacy int16/int32. */
static int put_length(Writer *w, Py_ssize_t length, int flexible, int legacy_size)
{
    if (flexible)
        return put_uvarint(w, (uint64_t)length + 1);
    if (legacy_size == 2 && length > INT16_MAX)
        return pack_error("%s", "'h' format requires -32768 <= number <= 32767");
    if (legacy_size == 4 && length > INT32_MAX)
        return pack_error("%s", "'i' format requires -2147483648 <= number <= 2147483647");
    return put_be(w, (uint64_t)length, legacy_size);
}

static int put_null(Writer *w, int flexible, int legacy_size)
{
    if (flexible)
        return put_be(w, 0, 1);
    return put_be(w, legacy_size == 2 ? 0xFFFF : 0xFFFFFFFF, legacy_size);
}

/* A duration's milliseconds as compiled_codec._milliseconds gives them,
 * round(value.total_seconds() * 1000), without the Python call: for a timedelta whose
 * microseconds a double holds exactly (under 2**53, some 285 years), total_seconds()
 * is the double division of its microseconds by 10**6 (int / int divides so when both
 * fit in 53 bits), and round() rounds half to even as nearbyint does in the default
 * rounding mode. NULL, with no error set, for anything else: the converter decides. */
static PyObject *milliseconds_of(PyObject *value)
{
    if (!PyDelta_CheckExact(value))
        return NULL;
    int64_t days = PyDateTime_DELTA_GET_DAYS(value);
    if (days > 100000000 || days < -100000000)
        return NULL;
    int64_t micros = (days * 86400 + PyDateTime_DELTA_GET_SECONDS(value)) * 1000000
                     + PyDateTime_DELTA_GET_MICROSECONDS(value);
    if (micros >= ((int64_t)1 << 53) || micros <= -((int64_t)1 << 53))
        return NULL;
    return PyLong_FromDouble(nearbyint((double)micros / 1e6 * 1000.0));
}

static int encode_value(Writer *w, PyObject *step, PyObject *value, int flexible, int depth)
{
    long op = PyLong_AsLong(PyTuple_GET_ITEM(step, 0));
    switch (op) {
    case E_FIXED:
        return put_fixed(w, (int)PyLong_AsLong(PyTuple_GET_ITEM(step, 2)), value);
    case E_OPTIONAL_TIMESTAMP:
        /* _optional_timestamp(None) without the call: every Produce answer's
         * log_append_time is None unless the topic stamps LogAppendTime */
        if (value == Py_None) {
            PyObject *minus_one = PyLong_FromLong(-1);  /* a small int: never fails */
            int failed = put_fixed(w, (int)PyLong_AsLong(PyTuple_GET_ITEM(step, 2)), minus_one);
            Py_DECREF(minus_one);
            return failed;
        }
        /* fall through: a datetime is converted by the converter */
    case E_CONVERT:
    case E_DURATION: {
        PyObject *converted = op == E_DURATION ? milliseconds_of(value) : NULL;
        if (converted == NULL && !PyErr_Occurred())
            converted = PyObject_CallOneArg(PyTuple_GET_ITEM(step, 3), value);
        if (converted == NULL)
            return -1;
        int failed = put_fixed(w, (int)PyLong_AsLong(PyTuple_GET_ITEM(step, 2)), converted);
        Py_DECREF(converted);
        return failed;
    }
    case E_UUID: {
        if (value == Py_None)
            return put(w, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16);
        PyObject *raw = PyObject_GetAttrString(value, "bytes");
        if (raw == NULL)
            return -1;
        char padded[16] = {0};
        if (!PyBytes_Check(raw)) {
            Py_DECREF(raw);
            return pack_error("%s", "argument for 's' must be a bytes object");
        }
        Py_ssize_t n = PyBytes_GET_SIZE(raw);
        memcpy(padded, PyBytes_AS_STRING(raw), n < 16 ? n : 16);
        Py_DECREF(raw);
        return put(w, padded, 16);
    }
    case E_STRING: {
        if (value == Py_None && PyObject_IsTrue(PyTuple_GET_ITEM(step, 2)))
            return put_null(w, flexible, 2);
        const char *text;
        Py_ssize_t n;
        if (PyUnicode_CheckExact(value)) {
            text = PyUnicode_AsUTF8AndSize(value, &n);
            if (text == NULL)
                return -1;
        } else if (PyBytes_Check(value)) {
            text = PyBytes_AS_STRING(value);
            n = PyBytes_GET_SIZE(value);
        } else {
            PyErr_Format(PyExc_TypeError, "a string field holds %.100s", Py_TYPE(value)->tp_name);
            return -1;
        }
        if (put_length(w, n, flexible, 2) < 0)
            return -1;
        return put(w, text, n);
    }
    case E_BYTES: {
        if (value == Py_None && PyObject_IsTrue(PyTuple_GET_ITEM(step, 2)))
            return put_null(w, flexible, 4);
        if (w->keep_large && !PyObject_CheckBuffer(value)) {
            /* records left in their file (storage.FileSlice): their length, then the
             * slice itself as a chunk of its own, which the connection sends from the file */
            if (file_chunk_type == NULL || !PyObject_TypeCheck(value, (PyTypeObject *)file_chunk_type)) {
                PyErr_Format(PyExc_TypeError, "a bytes field holds %.100s, neither a buffer nor a FileSlice",
                             Py_TYPE(value)->tp_name);
                return -1;
            }
            Py_ssize_t n = PyObject_Length(value);
            if (n < 0 || put_length(w, n, flexible, 4) < 0 || flush(w) < 0 || PyList_Append(w->chunks, value) < 0)
                return -1;
            w->total += n;
            return 0;
        }
        Py_buffer view;
        if (PyObject_GetBuffer(value, &view, PyBUF_SIMPLE) < 0)
            return -1;
        int failed = put_length(w, view.len, flexible, 4);
        if (!failed) {
            if (view.len >= LARGE && w->keep_large) {
                failed = flush(w) < 0 || PyList_Append(w->chunks, value) < 0;
                w->total += view.len;
            } else {
                failed = put(w, view.buf, view.len);
            }
        }
        PyBuffer_Release(&view);
        return failed ? -1 : 0;
    }
    case E_STRUCT:
        if (PyObject_IsTrue(PyTuple_GET_ITEM(step, 2))) { /* KIP-893 nullable struct: int8 marker */
            if (value == Py_None)
                return put_be(w, 0xFF, 1);
            if (put_be(w, 1, 1) < 0)
                return -1;
        }
        return encode_plan(w, PyTuple_GET_ITEM(step, 3), value, depth + 1);
    case E_ARRAY:
    case E_ENTITIES: {
        if (value == Py_None)
            return put_null(w, flexible, 4);
        PyObject *items = PySequence_Fast(value, "an array field holds no sequence");
        if (items == NULL)
            return -1;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
        int failed = put_length(w, n, flexible, 4);
        PyObject *inner = PyTuple_GET_ITEM(step, 2);
        for (Py_ssize_t i = 0; i < n && !failed; i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(items, i);
            failed = op == E_ENTITIES ? encode_plan(w, inner, item, depth + 1)
                                      : encode_value(w, inner, item, flexible, depth + 1);
        }
        Py_DECREF(items);
        return failed ? -1 : 0;
    }
    default:
        PyErr_Format(PyExc_SystemError, "unknown encode step %ld", op);
        return -1;
    }
}

/* The tag section, as compiled_writers._write_tags writes it: the tagged fields whose
 * value differs from its default, each as tag, size and its flexible encoding. */
static int encode_tags(Writer *w, PyObject *tagged, PyObject *entity, int depth)
{
    Py_ssize_t n = PyTuple_GET_SIZE(tagged), written = 0;
    Writer parts;
    writer_init(&parts, 0);
    int failed = 0;
    for (Py_ssize_t i = 0; i < n && !failed; i++) {
        PyObject *entry = PyTuple_GET_ITEM(tagged, i);
        PyObject *value = PyObject_GetAttr(entity, PyTuple_GET_ITEM(entry, 1));
        if (value == NULL) {
            failed = 1;
            break;
        }
        int is_default = PyObject_RichCompareBool(value, PyTuple_GET_ITEM(entry, 2), Py_EQ);
        if (is_default < 0) {
            failed = 1;
        } else if (!is_default) {
            Writer one;
            writer_init(&one, 0);
            failed = encode_value(&one, PyTuple_GET_ITEM(entry, 3), value, 1, depth + 1) < 0
                     || put_uvarint(&parts, PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(entry, 0))) < 0
                     || put_uvarint(&parts, (uint64_t)one.len) < 0 || put(&parts, one.data, one.len) < 0;
            writer_free(&one);
            written++;
        }
        Py_DECREF(value);
    }
    if (!failed)
        failed = put_uvarint(w, (uint64_t)written) < 0 || put(w, parts.data, parts.len) < 0;
    writer_free(&parts);
    return failed ? -1 : 0;
}

/* plan: (flexible, steps) */
static int encode_plan(Writer *w, PyObject *plan, PyObject *entity, int depth)
{
    if (depth > TOO_DEEP) {
        PyErr_SetString(PyExc_RecursionError, "response nested too deep");
        return -1;
    }
    int flexible = PyTuple_GET_ITEM(plan, 0) == Py_True;
    PyObject *steps = PyTuple_GET_ITEM(plan, 1);
    Py_ssize_t n = PyTuple_GET_SIZE(steps);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *step = PyTuple_GET_ITEM(steps, i);
        long op = PyLong_AsLong(PyTuple_GET_ITEM(step, 0));
        if (op == E_NO_TAGS) {
            if (put_be(w, 0, 1) < 0)
                return -1;
            continue;
        }
        if (op == E_TAGS) {
            if (encode_tags(w, PyTuple_GET_ITEM(step, 1), entity, depth) < 0)
                return -1;
            continue;
        }
        PyObject *value = PyObject_GetAttr(entity, PyTuple_GET_ITEM(step, 1));
        if (value == NULL)
            return -1;
        int failed = encode_value(w, step, value, flexible, depth);
        Py_DECREF(value);
        if (failed < 0)
            return -1;
    }
    return 0;
}

static PyObject *encode_response(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    /* METH_FASTCALL: the arguments read in place, with no tuple made and parsed (this runs
     * at every response) */
    if (nargs != 4 || !PyTuple_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "encode_response(correlation_id, flexible_header, plan: tuple, entity)");
        return NULL;
    }
    PyObject *correlation_id = args[0], *plan = args[2], *entity = args[3];
    int flexible_header = PyObject_IsTrue(args[1]);
    if (flexible_header < 0)
        return NULL;
    Writer w;
    writer_init(&w, 1);
    PyObject *result = NULL;
    /* the size prefix (set below), the correlation id, header v1's empty tag section */
    if (put_be(&w, 0, 4) < 0 || put_fixed(&w, 'i', correlation_id) < 0)
        goto done;
    if (flexible_header && put_be(&w, 0, 1) < 0)
        goto done;
    if (encode_plan(&w, plan, entity, 0) < 0)
        goto done;
    if (w.chunks == NULL) {
        uint32_t size = (uint32_t)(w.len - 4);
        for (int i = 0; i < 4; i++)
            w.data[i] = (char)(size >> (24 - 8 * i));
        PyObject *only = PyBytes_FromStringAndSize(w.data, w.len);
        if (only == NULL)
            goto done;
        result = PyList_New(1);
        if (result == NULL) {
            Py_DECREF(only);
            goto done;
        }
        PyList_SET_ITEM(result, 0, only);
        goto done;
    }
    if (flush(&w) < 0)
        goto done;
    /* the first chunk, made here and seen by no one yet, starts with the size prefix */
    uint32_t size = (uint32_t)(w.total - 4);
    char *first = PyBytes_AS_STRING(PyList_GET_ITEM(w.chunks, 0));
    for (int i = 0; i < 4; i++)
        first[i] = (char)(size >> (24 - 8 * i));
    result = Py_NewRef(w.chunks);
done:
    writer_free(&w);
    return result;
}

/* --- building a response entity ------------------------------------------------------ */

/* entities.build_plan's field kinds */
/* B_CONVERT's extra is the converter; B_ERROR_CODE's, B_DURATION's and B_TIMESTAMP's
 * is (converter, the type it returns values of as they are), and the commonest values
 * are converted here without calling it (converted_here). */
enum { B_VALUE = 0, B_CONVERT = 1, B_ENTITY = 2, B_TUPLE = 3, B_ENTITIES = 4, B_ERROR_CODE = 5, B_DURATION = 6,
       B_TIMESTAMP = 7 };

/* The offset of slot `name` of class `cls`, where a plain member descriptor holds it; -1
 * otherwise (entities.py then keeps its Python builder for that class). */
static PyObject *member_offset(PyObject *self, PyObject *args)
{
    PyObject *cls, *name;
    if (!PyArg_ParseTuple(args, "O!U", &PyType_Type, &cls, &name))
        return NULL;
    PyObject *found = PyObject_GetAttr(cls, name);
    if (found == NULL) {
        PyErr_Clear();
        return PyLong_FromLong(-1);
    }
    Py_ssize_t offset = -1;
    if (Py_IS_TYPE(found, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)found)->d_member;
        if (member->type == T_OBJECT_EX && PyType_IsSubtype((PyTypeObject *)cls, PyDescr_TYPE(found)))
            offset = member->offset;
    }
    Py_DECREF(found);
    return PyLong_FromSsize_t(offset);
}

static PyObject *build_entity(PyObject *plan, PyObject *values, int depth);

/* An entity-valued field: a dict is built with the nested plan, anything else (None, an
 * entity built already) is taken as it is. */
static PyObject *entity_value(PyObject *nested, PyObject *value, int depth)
{
    if (value == Py_None || !PyDict_Check(value))
        return Py_NewRef(value);
    return build_entity(nested, value, depth + 1);
}

/* What entities.py's converters give for the values handlers pass most (an ErrorCode
 * member, a duration or a timestamp in milliseconds), or NULL with no error set where
 * the converter is to be called:
 * - _error_code, _ms_timedelta, _ms_datetime return a value of their type as it is;
 * - _ms_timedelta(ms) is timedelta(milliseconds=ms) (timedelta_of, for an int whose
 *   microseconds fit in int64; a larger one is left to the converter);
 * - _ms_datetime(ms) is None for None and for a negative int (Kafka's -1). */
static PyObject *converted_here(long kind, PyObject *extra, PyObject *value)
{
    if (Py_TYPE(value) == (PyTypeObject *)PyTuple_GET_ITEM(extra, 1))
        return Py_NewRef(value);
    if (kind == B_DURATION && PyLong_CheckExact(value)) {
        int overflow;
        long long ms = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (!overflow && ms <= INT64_MAX / 1000 && ms >= -(INT64_MAX / 1000))
            return timedelta_of(ms);
    }
    if (kind == B_TIMESTAMP && (value == Py_None || (PyLong_CheckExact(value) && _PyLong_Sign(value) < 0)))
        return Py_NewRef(Py_None);
    return NULL;
}

static PyObject *field_value(PyObject *field, PyObject *value, int depth)
{
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(field, 2));
    PyObject *extra = PyTuple_GET_ITEM(field, 4);
    switch (kind) {
    case B_VALUE:
        return Py_NewRef(value);
    case B_CONVERT:
        return PyObject_CallOneArg(extra, value);
    case B_ERROR_CODE:
    case B_DURATION:
    case B_TIMESTAMP: {
        PyObject *converted = converted_here(kind, extra, value);
        if (converted == NULL && !PyErr_Occurred())
            converted = PyObject_CallOneArg(PyTuple_GET_ITEM(extra, 0), value);
        return converted;
    }
    case B_ENTITY:
        return entity_value(extra, value, depth);
    case B_TUPLE:
        if (value == Py_None)
            return Py_NewRef(Py_None);
        return PySequence_Tuple(value);
    case B_ENTITIES: {
        if (value == Py_None)
            return Py_NewRef(Py_None);
        PyObject *items = PySequence_Fast(value, "an array is given as no iterable");
        if (items == NULL)
            return NULL;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
        PyObject *out = PyTuple_New(n);
        for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
            PyObject *item = entity_value(extra, PySequence_Fast_GET_ITEM(items, i), depth);
            if (item == NULL)
                Py_CLEAR(out);
            else
                PyTuple_SET_ITEM(out, i, item);
        }
        Py_DECREF(items);
        return out;
    }
    default:
        PyErr_Format(PyExc_SystemError, "unknown build kind %ld", kind);
        return NULL;
    }
}

/* plan: (cls, field names, check_names, ((name, offset, kind, default, extra), ...)) */
static PyObject *build_entity(PyObject *plan, PyObject *values, int depth)
{
    if (depth > TOO_DEEP) {
        PyErr_SetString(PyExc_RecursionError, "entity nested too deep");
        return NULL;
    }
    PyObject *cls = PyTuple_GET_ITEM(plan, 0), *names = PyTuple_GET_ITEM(plan, 1);
    PyObject *fields = PyTuple_GET_ITEM(plan, 3);
    if (!PyDict_Check(values)) {
        PyErr_SetString(PyExc_TypeError, "an entity is built from a dict");
        return NULL;
    }
    /* a name this version lacks is dropped, unless no version has it (a handler's typo) */
    Py_ssize_t pos = 0;
    PyObject *key, *item;
    while (PyDict_Next(values, &pos, &key, &item)) {
        int known = PySet_Contains(names, key);
        if (known < 0)
            return NULL;
        if (!known) {
            PyObject *checked = PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(plan, 2), cls, values, NULL);
            if (checked == NULL)
                return NULL;
            Py_DECREF(checked);
            break;
        }
    }
    PyTypeObject *type = (PyTypeObject *)cls;
    PyObject *entity = type->tp_alloc(type, 0);
    if (entity == NULL)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(fields);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *field = PyTuple_GET_ITEM(fields, i);
        PyObject *given = PyDict_GetItemWithError(values, PyTuple_GET_ITEM(field, 0));
        PyObject *value;
        if (given == NULL) {
            if (PyErr_Occurred())
                goto fail;
            value = Py_NewRef(PyTuple_GET_ITEM(field, 3));
        } else {
            Py_INCREF(given); /* a converter may run Python code that changes the dict */
            value = field_value(field, given, depth);
            Py_DECREF(given);
            if (value == NULL)
                goto fail;
        }
        PyObject **slot = (PyObject **)((char *)entity + PyLong_AsSsize_t(PyTuple_GET_ITEM(field, 1)));
        Py_XSETREF(*slot, value);
    }
    return entity;
fail:
    Py_DECREF(entity);
    return NULL;
}

static PyObject *build(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    /* METH_FASTCALL, as encode_response: a response view's values are built at every response */
    if (nargs != 2 || !PyTuple_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "build(plan: tuple, values)");
        return NULL;
    }
    return build_entity(args[0], args[1], 0);
}

/* --- the error codes of a response ------------------------------------------------------ */

/* Appends to *found (made on the first) every true error code of `entity`, following
 * plan ((name, nested plan or None for an error code, is an array), ...). */
static int error_codes_of(PyObject *plan, PyObject *entity, PyObject **found, int depth)
{
    if (depth > TOO_DEEP) {
        PyErr_SetString(PyExc_RecursionError, "response nested too deep");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(plan);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *step = PyTuple_GET_ITEM(plan, i);
        PyObject *nested = PyTuple_GET_ITEM(step, 1);
        PyObject *value = PyObject_GetAttr(entity, PyTuple_GET_ITEM(step, 0));
        if (value == NULL)
            return -1;
        int failed = 0;
        if (nested == Py_None) {
            int truth = PyObject_IsTrue(value); /* ErrorCode.none is 0 */
            if (truth < 0)
                failed = 1;
            else if (truth) {
                if (*found == NULL && (*found = PyList_New(0)) == NULL)
                    failed = 1;
                else
                    failed = PyList_Append(*found, value) < 0;
            }
        } else if (value != Py_None) {
            if (PyObject_IsTrue(PyTuple_GET_ITEM(step, 2))) {
                PyObject *items = PySequence_Fast(value, "an array field holds no sequence");
                if (items == NULL) {
                    failed = 1;
                } else {
                    Py_ssize_t count = PySequence_Fast_GET_SIZE(items);
                    for (Py_ssize_t j = 0; j < count && !failed; j++)
                        failed = error_codes_of(nested, PySequence_Fast_GET_ITEM(items, j), found, depth + 1) < 0;
                    Py_DECREF(items);
                }
            } else {
                failed = error_codes_of(nested, value, found, depth + 1) < 0;
            }
        }
        Py_DECREF(value);
        if (failed)
            return -1;
    }
    return 0;
}

static PyObject *error_codes(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    /* METH_FASTCALL, as encode_response: the metrics of every response served */
    if (nargs != 2 || !PyTuple_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "error_codes(plan: tuple, entity)");
        return NULL;
    }
    PyObject *plan = args[0], *entity = args[1], *found = NULL;
    if (error_codes_of(plan, entity, &found, 0) < 0) {
        Py_XDECREF(found);
        return NULL;
    }
    return found != NULL ? found : Py_NewRef(Py_None);
}

static PyObject *accept_file_chunks(PyObject *self, PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "accept_file_chunks takes a class");
        return NULL;
    }
    Py_INCREF(cls);
    Py_XSETREF(file_chunk_type, cls);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(flexible, header_type, malformed_error, length_error): what the functions below need"},
    {"parse_header", parse_header, METH_O, "parse_header(frame) -> RequestHeader, as codec.parse_request_header"},
    {"check_body", check_body, METH_VARARGS,
     "check_body(plan, frame, offset) -> offset after the body, as request_bounds.check_request_body"},
    {"decode", (PyCFunction)(void (*)(void))decode, METH_FASTCALL,
     "decode(cls, frame, offset) -> the request entity, as codec.decode_request_in_python, or None where the "
     "Python path is to read it"},
    {"encode_response", (PyCFunction)(void (*)(void))encode_response, METH_FASTCALL,
     "encode_response(correlation_id, flexible_header, plan, entity) -> chunks, as codec.encode_response"},
    {"member_offset", member_offset, METH_VARARGS,
     "member_offset(cls, name) -> the offset of slot `name` in instances of cls, or -1"},
    {"build", (PyCFunction)(void (*)(void))build, METH_FASTCALL,
     "build(plan, values) -> the entity, as entities.compiled_builder(cls)(values)"},
    {"error_codes", (PyCFunction)(void (*)(void))error_codes, METH_FASTCALL,
     "error_codes(plan, entity) -> the true error codes in entity, in order, or None if there is none"},
    {"accept_file_chunks", accept_file_chunks, METH_O,
     "accept_file_chunks(cls): the one non-buffer type a bytes or records value may hold (storage.FileSlice)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_codec", NULL, -1, methods};

PyMODINIT_FUNC PyInit__codec(void)
{
    PyObject *struct_module = PyImport_ImportModule("struct");
    if (struct_module == NULL)
        return NULL;
    struct_error = PyObject_GetAttrString(struct_module, "error");
    Py_DECREF(struct_module);
    if (struct_error == NULL)
        return NULL;
    memset(flexible_cache, -1, sizeof flexible_cache);
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL)
        return NULL;
    uuid_int_name = PyUnicode_InternFromString("int");
    uuid_is_safe_name = PyUnicode_InternFromString("is_safe");
    if (uuid_int_name == NULL || uuid_is_safe_name == NULL)
        return NULL;
    return PyModule_Create(&module);
}
