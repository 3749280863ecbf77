/* One request served inline, in C. Its Python twin: Connection._take and _serve_inline's
 * per-frame steps in broker/network/connection.py (_decode, the RequestContext), with
 * Dispatcher.handle_now (broker/network/dispatch.py), Metrics.request_served
 * (broker/metrics.py) and Connection._send and _write. The Python code stays the
 * specification and the path taken without this extension or with OTTLA_PURE_PYTHON=1
 * (broker/network/compiled_pipeline.py sets this up). tests/integration/test_request_paths.py
 * runs a broker on each path and compares every answer byte for byte and the metrics;
 * tests/unit/test_pipeline.py calls serve and take with frames no client sends.
 *
 * configure(parse_header, decode, encode_response, encodings, encode_in_python,
 *           builders, error_plan_of, error_codes, context_type, context_offsets,
 *           latency_buckets, metrics_layout)
 *   is called once by compiled_pipeline.py: the functions of protocol/_codec and
 *   codec.py, codec._encoding ({response class: (flexible header, encode plan)}),
 *   context's _builders ({(api key, version): builder}), metrics' _nested_error_plan and
 *   _codec.error_codes, RequestContext and the slot offsets of its seven fields in
 *   declaration order (services, header, peer, advertised_address, session, deferred,
 *   throttle_ms), metrics.LATENCY_BUCKETS, and compiled_pipeline.METRICS_SLOTS laid out
 *   ((Metrics, (bytes_out,)), (ApiMetrics, (requests, seconds, buckets, errors)), each
 *   name as its slot's offset): a Pipeline is made for a Metrics alone, and an API's
 *   counters are counted at their slots where its ApiMetrics is one (else by
 *   Metrics.request_served).
 *
 * Pipeline(routes, services, peer, advertised, session, faults, metrics, connection,
 *          transport, loop_time)
 *   is one per connection. Its serve(frame) serves one frame, or answers None having
 *   done nothing (no handler run, nothing counted) wherever the Python path is to serve
 *   it: a frame outside 4..INLINE_MAX bytes, an (api key, version) not in `routes`
 *   (compiled_pipeline.add_route, called the first time the Python path serves that
 *   pair), an API whose handler may wait, faults armed, a header or body the decoder
 *   refuses or leaves to kio. The Python path then refuses or serves it exactly as it
 *   always does. Otherwise it answers
 *     (header, api, body, ctx, response, out)
 *   where out is True for a response sent here (one chunk: Connection._write's steps,
 *   the bytes counted, the connection's last_active set, transport.write), the encoded
 *   chunks of a response for the connection to send (several: large values, file
 *   slices), None for no response or a transport already closing (_send's check, made
 *   before encoding), the exception the encoding or the write raised (the connection
 *   raises it, as _send would), or, for a handler that answered with a coroutine, the
 *   perf_counter time it started at (the connection hands the coroutine to the worker,
 *   as handle_now's served_later). An exception of the handler, the response's builder
 *   or the metrics propagates, as out of handle_now.
 *
 * configure_encoded((Encoded, (entity, flexible, body offsets)))
 *   is called once by compiled_pipeline.py: protocol/codec.Encoded, a response encoded
 *   ahead of time. A handler's Encoded is sent as codec.encode_response sends it (size,
 *   the request's correlation id, the header's empty tagged fields where flexible, then
 *   its body's bytes) and its entity's error codes are counted.
 *
 * configure_take(layout)
 *   is called once by compiled_pipeline.lay_out_take, as connection.py is imported: for
 *   the Connection class, FrameIntake, FrameReader, RequestMemory and FileSender, the class
 *   and the offsets of the slots take reads (and, of the connection's, the last_active and
 *   client_id it sets), in compiled_pipeline.TAKE_SLOTS's order (the enums below). take
 *   reads them there, with no look-up by name, and each object only once it has checked
 *   its class: a Pipeline is made for a Connection alone, and a slot holding an object of
 *   another class than laid out is refused (TypeError), never read at those offsets.
 *
 * take(data) is _take for the commonest read: `data` is one whole frame (FrameReader.feed's
 *   first case), nothing is held or half received, the request memory has room, and the
 *   worker waits with nothing queued (_take's checks, read at the slots of the connection,
 *   its FrameIntake, FrameReader, RequestMemory and FileSender); anything else answers None
 *   at once, for _take. The frame is then served as serve serves it, and take answers None (not
 *   served: _take's), True when that was all (the response sent, nothing for after it:
 *   no throttle, close or closing transport; the handler's deferred work, if any, run
 *   there by Connection._run_deferred, as _take's _responded runs it), serve's tuple
 *   for _take to finish, or the exception the handler raised.
 *
 * routes: {api_key << 16 | version: (api, request class, handler, (api_key, version),
 *          may_wait)}.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* connection._INLINE_MAX_BYTES: larger requests go through the worker. */
#define INLINE_MAX (64 * 1024)
#define MAX_BUCKETS 32

static PyObject *parse_header, *decode, *encode_response, *encodings, *encode_in_python;
static PyObject *builders, *error_plan_of, *error_codes, *context_type;
static PyObject *plans;  /* {response class: error_plan_of(it)}, filled as classes are met */
static Py_ssize_t context_offsets[7];
static double buckets[MAX_BUCKETS];
static Py_ssize_t bucket_count = -1;
static PyObject *s_armed, *s_apis, *s_update, *s_entity, *s_request_served, *one, *s_is_closing, *s_write, *s_done;
static PyObject *s_close_after_response, *s_name, *s_run_deferred;
static PyObject *after_prefix;  /* slice(4, None): a frame's bytes after its size prefix */

/* The state take reads (and the two fields it writes), at the offsets of their slots:
 * configure_take's layout, in this order, from compiled_pipeline.TAKE_SLOTS. */
enum { C_INTAKE, C_WAKEUP, C_UNFINISHED, C_DRAINED, C_MUTED, C_CLOSING, C_FILE_SENDER, C_LAST_ACTIVE, C_CLIENT_ID,
       C_COUNT };
enum { I_READER, I_MEMORY, I_POOLED, I_HELD, I_FRAMES, I_COUNT };
enum { R_SIZE, R_PREFIX, R_BACKLOG, R_MAX_BYTES, R_COUNT };
enum { M_LIMIT, M_USED, M_COUNT };
enum { S_FINISHED, S_COUNT };
static PyTypeObject *connection_type, *intake_type, *reader_type, *memory_type, *sender_type;
static Py_ssize_t connection_at[C_COUNT], intake_at[I_COUNT], reader_at[R_COUNT], memory_at[M_COUNT],
    sender_at[S_COUNT];
/* Metrics' bytes_out, and an ApiMetrics' counters (configure's metrics layout). */
enum { MT_BYTES_IN, MT_BYTES_OUT, MT_COUNT };
enum { A_REQUESTS, A_SECONDS, A_BUCKETS, A_ERRORS, A_COUNT };
static PyTypeObject *metrics_type, *api_metrics_type;
static Py_ssize_t metrics_at[MT_COUNT], api_at[A_COUNT];
/* codec.Encoded, a response encoded ahead of time: its entity, header flag and body's bytes
 * (configure_encoded's layout). */
enum { E_ENTITY, E_FLEXIBLE, E_BODY, E_COUNT };
static PyTypeObject *encoded_type;
static Py_ssize_t encoded_at[E_COUNT];
#define SLOT(owner, offset) (*(PyObject **)((char *)(owner) + (offset)))
static PyObject *slot(PyObject *owner, Py_ssize_t offset);

/* One (class, (offset, ...)) of the layout: the class in *type, the offsets in `at`, each
 * checked to lie inside the class's instances (member_offset answers -1 for a name that is
 * no slot of it). Borrowed: configure_take keeps the classes once all are checked. */
static int lay_out(PyObject *entry, PyTypeObject **type, Py_ssize_t *at, Py_ssize_t count)
{
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2 || !PyType_Check(PyTuple_GET_ITEM(entry, 0))
            || !PyTuple_Check(PyTuple_GET_ITEM(entry, 1)) || PyTuple_GET_SIZE(PyTuple_GET_ITEM(entry, 1)) != count) {
        PyErr_Format(PyExc_ValueError, "configure_take: (class, %zd slot offsets) expected", count);
        return -1;
    }
    PyTypeObject *cls = (PyTypeObject *)PyTuple_GET_ITEM(entry, 0);
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t offset = PyLong_AsSsize_t(PyTuple_GET_ITEM(PyTuple_GET_ITEM(entry, 1), i));
        if (offset == -1 && PyErr_Occurred())
            return -1;
        if (offset < (Py_ssize_t)sizeof(PyObject) || offset + (Py_ssize_t)sizeof(PyObject *) > cls->tp_basicsize) {
            PyErr_Format(PyExc_ValueError, "configure_take: slot %zd of %s lies outside its instances", i,
                         cls->tp_name);
            return -1;
        }
        at[i] = offset;
    }
    *type = cls;
    return 0;
}

static PyObject *configure_take(PyObject *self, PyObject *layout)
{
    if (!PyTuple_Check(layout) || PyTuple_GET_SIZE(layout) != 5) {
        PyErr_SetString(PyExc_ValueError, "configure_take: the connection's, intake's, reader's, memory's and "
                                          "file sender's layouts expected");
        return NULL;
    }
    /* All checked before any is kept: a layout refused leaves the one before in place. */
    PyTypeObject *types[5];
    Py_ssize_t c_at[C_COUNT], i_at[I_COUNT], r_at[R_COUNT], m_at[M_COUNT], s_at[S_COUNT];
    if (lay_out(PyTuple_GET_ITEM(layout, 0), &types[0], c_at, C_COUNT) < 0
            || lay_out(PyTuple_GET_ITEM(layout, 1), &types[1], i_at, I_COUNT) < 0
            || lay_out(PyTuple_GET_ITEM(layout, 2), &types[2], r_at, R_COUNT) < 0
            || lay_out(PyTuple_GET_ITEM(layout, 3), &types[3], m_at, M_COUNT) < 0
            || lay_out(PyTuple_GET_ITEM(layout, 4), &types[4], s_at, S_COUNT) < 0)
        return NULL;
    PyTypeObject **kept[5] = {&connection_type, &intake_type, &reader_type, &memory_type, &sender_type};
    for (int i = 0; i < 5; i++)
        Py_XSETREF(*kept[i], (PyTypeObject *)Py_NewRef(types[i]));
    memcpy(connection_at, c_at, sizeof c_at);
    memcpy(intake_at, i_at, sizeof i_at);
    memcpy(reader_at, r_at, sizeof r_at);
    memcpy(memory_at, m_at, sizeof m_at);
    memcpy(sender_at, s_at, sizeof s_at);
    Py_RETURN_NONE;
}

static PyObject *configure_encoded(PyObject *self, PyObject *layout)
{
    PyTypeObject *type;
    Py_ssize_t at[E_COUNT];
    if (lay_out(layout, &type, at, E_COUNT) < 0)
        return NULL;
    Py_XSETREF(encoded_type, (PyTypeObject *)Py_NewRef(type));
    memcpy(encoded_at, at, sizeof at);
    Py_RETURN_NONE;
}

static PyObject *configure(PyObject *self, PyObject *args)
{
    PyObject *offsets, *bounds, *metrics_layout;
    PyObject *a[9];
    if (!PyArg_ParseTuple(args, "OOOO!OO!OOO!O!O!O!", &a[0], &a[1], &a[2], &PyDict_Type, &a[3], &a[4],
                          &PyDict_Type, &a[5], &a[6], &a[7], &PyType_Type, &a[8], &PyTuple_Type, &offsets,
                          &PyTuple_Type, &bounds, &PyTuple_Type, &metrics_layout))
        return NULL;
    PyTypeObject *types[2];
    Py_ssize_t mt_at[MT_COUNT], a_at[A_COUNT];
    if (PyTuple_GET_SIZE(metrics_layout) != 2) {
        PyErr_SetString(PyExc_ValueError, "configure: the Metrics' and ApiMetrics' layouts expected");
        return NULL;
    }
    if (lay_out(PyTuple_GET_ITEM(metrics_layout, 0), &types[0], mt_at, MT_COUNT) < 0
            || lay_out(PyTuple_GET_ITEM(metrics_layout, 1), &types[1], a_at, A_COUNT) < 0)
        return NULL;
    if (PyTuple_GET_SIZE(offsets) != 7 || PyTuple_GET_SIZE(bounds) > MAX_BUCKETS) {
        PyErr_SetString(PyExc_ValueError, "seven slot offsets, and at most 32 latency buckets");
        return NULL;
    }
    Py_ssize_t size = ((PyTypeObject *)a[8])->tp_basicsize;
    for (int i = 0; i < 7; i++) {
        Py_ssize_t offset = PyLong_AsSsize_t(PyTuple_GET_ITEM(offsets, i));
        if (offset == -1 && PyErr_Occurred())
            return NULL;
        if (offset < (Py_ssize_t)sizeof(PyObject) || offset + (Py_ssize_t)sizeof(PyObject *) > size) {
            PyErr_SetString(PyExc_ValueError, "a RequestContext slot outside its instances");
            return NULL;
        }
        context_offsets[i] = offset;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(bounds); i++) {
        buckets[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(bounds, i));
        if (buckets[i] == -1.0 && PyErr_Occurred())
            return NULL;
    }
    bucket_count = PyTuple_GET_SIZE(bounds);
    Py_XSETREF(metrics_type, (PyTypeObject *)Py_NewRef(types[0]));
    Py_XSETREF(api_metrics_type, (PyTypeObject *)Py_NewRef(types[1]));
    memcpy(metrics_at, mt_at, sizeof mt_at);
    memcpy(api_at, a_at, sizeof a_at);
    PyObject **slots[9] = {&parse_header, &decode, &encode_response, &encodings, &encode_in_python,
                           &builders, &error_plan_of, &error_codes, &context_type};
    for (int i = 0; i < 9; i++)
        Py_XSETREF(*slots[i], Py_NewRef(a[i]));
    PyDict_Clear(plans);  /* made by the error_plan_of configured before, if any */
    Py_RETURN_NONE;
}

typedef struct {
    PyObject_HEAD
    PyObject *routes, *services, *peer, *advertised, *session, *faults, *metrics, *apis;
    PyObject *connection, *transport, *loop_time;
} Pipeline;

static PyObject *serve(Pipeline *p, PyObject *frame);

static int pipeline_init(Pipeline *p, PyObject *args, PyObject *kwargs)
{
    PyObject *routes, *services, *peer, *advertised, *session, *faults, *metrics, *connection, *transport, *loop_time;
    if (!PyArg_ParseTuple(args, "O!OOOOOOOOO", &PyDict_Type, &routes, &services, &peer, &advertised, &session,
                          &faults, &metrics, &connection, &transport, &loop_time))
        return -1;
    if (metrics_type == NULL || !PyObject_TypeCheck(metrics, metrics_type)) {
        PyErr_SetString(PyExc_TypeError, "Pipeline: the metrics are not of the class configure laid out");
        return -1;
    }
    if (connection_type == NULL || !PyObject_TypeCheck(connection, connection_type)) {
        PyErr_SetString(PyExc_TypeError, "Pipeline: the connection is not of the class configure_take laid out");
        return -1;
    }
    PyObject *apis = PyObject_GetAttr(metrics, s_apis);
    if (apis == NULL)
        return -1;
    if (!PyDict_Check(apis)) {
        Py_DECREF(apis);
        PyErr_SetString(PyExc_TypeError, "metrics.apis is not a dict");
        return -1;
    }
    Py_XSETREF(p->apis, apis);
    Py_XSETREF(p->routes, Py_NewRef(routes));
    Py_XSETREF(p->services, Py_NewRef(services));
    Py_XSETREF(p->peer, Py_NewRef(peer));
    Py_XSETREF(p->advertised, Py_NewRef(advertised));
    Py_XSETREF(p->session, Py_NewRef(session));
    Py_XSETREF(p->faults, Py_NewRef(faults));
    Py_XSETREF(p->metrics, Py_NewRef(metrics));
    Py_XSETREF(p->connection, Py_NewRef(connection));
    Py_XSETREF(p->transport, Py_NewRef(transport));
    Py_XSETREF(p->loop_time, Py_NewRef(loop_time));
    return 0;
}

static int pipeline_traverse(Pipeline *p, visitproc visit, void *arg)
{
    Py_VISIT(p->routes);
    Py_VISIT(p->services);
    Py_VISIT(p->peer);
    Py_VISIT(p->advertised);
    Py_VISIT(p->session);
    Py_VISIT(p->faults);
    Py_VISIT(p->metrics);
    Py_VISIT(p->apis);
    Py_VISIT(p->connection);
    Py_VISIT(p->transport);
    Py_VISIT(p->loop_time);
    return 0;
}

static int pipeline_clear(Pipeline *p)
{
    Py_CLEAR(p->routes);
    Py_CLEAR(p->services);
    Py_CLEAR(p->peer);
    Py_CLEAR(p->advertised);
    Py_CLEAR(p->session);
    Py_CLEAR(p->faults);
    Py_CLEAR(p->metrics);
    Py_CLEAR(p->apis);
    Py_CLEAR(p->connection);
    Py_CLEAR(p->transport);
    Py_CLEAR(p->loop_time);
    return 0;
}

static void pipeline_dealloc(Pipeline *p)
{
    PyObject_GC_UnTrack(p);
    pipeline_clear(p);
    Py_TYPE(p)->tp_free((PyObject *)p);
}

/* time.perf_counter's clock (CLOCK_MONOTONIC on Linux), in seconds. */
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The RequestContext of a request, its slots set as its dataclass __init__ sets them. */
static PyObject *context_of(Pipeline *p, PyObject *header)
{
    PyTypeObject *type = (PyTypeObject *)context_type;
    PyObject *ctx = type->tp_alloc(type, 0);
    if (ctx == NULL)
        return NULL;
    PyObject *values[7] = {p->services, header, p->peer, p->advertised, p->session, Py_None, NULL};
    values[6] = PyLong_FromLong(0);
    if (values[6] == NULL) {
        Py_DECREF(ctx);
        return NULL;
    }
    for (int i = 0; i < 7; i++) {
        PyObject **slot = (PyObject **)((char *)ctx + context_offsets[i]);
        Py_XSETREF(*slot, i == 6 ? values[6] : Py_NewRef(values[i]));
    }
    return ctx;
}

/* Metrics.request_served: the counters of api_key's ApiMetrics, at their slots' offsets, or
 * the Python method where there is none yet (it makes it). */
static int count_served(Pipeline *p, PyObject *api_key, double seconds, PyObject *response)
{
    PyObject *api = PyDict_GetItemWithError(p->apis, api_key);  /* borrowed */
    if (api == NULL || !Py_IS_TYPE(api, api_metrics_type)) {
        if (PyErr_Occurred())
            return -1;
        PyObject *elapsed = PyFloat_FromDouble(seconds);
        if (elapsed == NULL)
            return -1;
        PyObject *done = PyObject_CallMethodObjArgs(p->metrics, s_request_served, api_key, elapsed, response, NULL);
        Py_DECREF(elapsed);
        if (done == NULL)
            return -1;
        Py_DECREF(done);
        return 0;
    }
    Py_INCREF(api);
    int failed = -1;
    PyObject *value, *sum, *plan = NULL, *codes = NULL;
    /* api.requests += 1 */
    if ((value = slot(api, api_at[A_REQUESTS])) == NULL || (sum = PyNumber_Add(value, one)) == NULL)
        goto done;
    Py_SETREF(SLOT(api, api_at[A_REQUESTS]), sum);
    /* api.seconds += seconds */
    if ((value = slot(api, api_at[A_SECONDS])) == NULL)
        goto done;
    double total = PyFloat_AsDouble(value);
    if ((total == -1.0 && PyErr_Occurred()) || (sum = PyFloat_FromDouble(total + seconds)) == NULL)
        goto done;
    Py_SETREF(SLOT(api, api_at[A_SECONDS]), sum);
    /* api.buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1 */
    Py_ssize_t index = 0;
    while (index < bucket_count && buckets[index] < seconds)
        index++;
    PyObject *list = slot(api, api_at[A_BUCKETS]);
    if (list == NULL)
        goto done;
    if (!PyList_Check(list) || index >= PyList_GET_SIZE(list)) {
        PyErr_SetString(PyExc_IndexError, "ApiMetrics.buckets is shorter than the latency buckets");
        goto done;
    }
    if ((sum = PyNumber_Add(PyList_GET_ITEM(list, index), one)) == NULL || PyList_SetItem(list, index, sum) < 0)
        goto done;
    /* the error codes in the response, counted as Kafka's ErrorsPerSec (an Encoded's: its entity's) */
    if (response != Py_None && encoded_type != NULL && Py_IS_TYPE(response, encoded_type)
            && (response = slot(response, encoded_at[E_ENTITY])) == NULL)
        goto done;
    if (response != Py_None) {
        /* metrics._nested_error_plan(type(response)), kept here by type: its functools.cache
         * costs a call and a key's tuple at every response */
        plan = PyDict_GetItemWithError(plans, (PyObject *)Py_TYPE(response));  /* borrowed */
        if (plan != NULL)
            Py_INCREF(plan);
        else if (PyErr_Occurred())
            goto done;
        else if ((plan = PyObject_CallOneArg(error_plan_of, (PyObject *)Py_TYPE(response))) == NULL
                || PyDict_SetItem(plans, (PyObject *)Py_TYPE(response), plan) < 0)
            goto done;
        PyObject *args[2] = {plan, response};
        codes = PyObject_Vectorcall(error_codes, args, 2, NULL);
        if (codes == NULL)
            goto done;
        if (codes != Py_None) {
            if ((value = slot(api, api_at[A_ERRORS])) == NULL)
                goto done;
            Py_INCREF(value);  /* held across Counter.update, Python code */
            PyObject *updated = PyObject_CallMethodOneArg(value, s_update, codes);
            Py_DECREF(value);
            if (updated == NULL)
                goto done;
            Py_DECREF(updated);
        }
    }
    failed = 0;
done:
    Py_XDECREF(plan);
    Py_XDECREF(codes);
    Py_DECREF(api);
    return failed;
}

static PyObject *raised(void);

/* codec._encoded_ahead: [size, correlation id, (an empty tagged fields' byte,) the body's
 * bytes] in one chunk, or the exception as the value (as encoded's). */
static PyObject *encoded_ahead(PyObject *correlation_id, PyObject *response)
{
    PyObject *flexible = slot(response, encoded_at[E_FLEXIBLE]), *body = slot(response, encoded_at[E_BODY]);
    if (flexible == NULL || body == NULL)
        return raised();
    if (!PyBytes_CheckExact(body)) {
        PyErr_SetString(PyExc_TypeError, "Encoded.body is not bytes");
        return raised();
    }
    int tagged = PyObject_IsTrue(flexible);
    long id = PyLong_AsLong(correlation_id);
    if (tagged < 0 || (id == -1 && PyErr_Occurred()))
        return raised();
    if (id < INT32_MIN || id > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a correlation id outside int32");
        return raised();
    }
    Py_ssize_t length = PyBytes_GET_SIZE(body), size = 4 + tagged + length;
    if (size > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a response over 2 GiB");
        return raised();
    }
    PyObject *chunk = PyBytes_FromStringAndSize(NULL, 4 + size);
    if (chunk == NULL)
        return raised();
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(chunk);
    uint32_t values[2] = {(uint32_t)size, (uint32_t)(int32_t)id};
    for (int i = 0; i < 2; i++) {
        out[4 * i] = (unsigned char)(values[i] >> 24);
        out[4 * i + 1] = (unsigned char)(values[i] >> 16);
        out[4 * i + 2] = (unsigned char)(values[i] >> 8);
        out[4 * i + 3] = (unsigned char)values[i];
    }
    if (tagged)
        out[8] = 0;
    memcpy(out + 8 + tagged, PyBytes_AS_STRING(body), (size_t)length);
    PyObject *chunks = PyList_New(1);
    if (chunks == NULL) {
        Py_DECREF(chunk);
        return raised();
    }
    PyList_SET_ITEM(chunks, 0, chunk);
    return chunks;
}

/* The response's chunks, as codec.encode_response makes them; an exception it raised is
 * answered as the value (the connection raises it where _send would have). */
static PyObject *encoded(PyObject *correlation_id, PyObject *response)
{
    PyObject *chunks;
    if (encoded_type != NULL && Py_IS_TYPE(response, encoded_type))
        return encoded_ahead(correlation_id, response);
    PyObject *how = PyDict_GetItemWithError(encodings, (PyObject *)Py_TYPE(response));  /* borrowed */
    if (how != NULL && PyTuple_Check(how) && PyTuple_GET_SIZE(how) == 2) {
        PyObject *args[4] = {correlation_id, PyTuple_GET_ITEM(how, 0), PyTuple_GET_ITEM(how, 1), response};
        chunks = PyObject_Vectorcall(encode_response, args, 4, NULL);
    } else if (PyErr_Occurred()) {
        return NULL;
    } else {
        PyObject *args[2] = {correlation_id, response};
        chunks = PyObject_Vectorcall(encode_in_python, args, 2, NULL);
    }
    if (chunks != NULL)
        return chunks;
    return raised();
}

/* The current exception, taken out of the error state, as a value. */
static PyObject *raised(void)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (value == NULL) {  /* cannot happen once normalized; kept an error all the same */
        Py_XDECREF(type);
        Py_XDECREF(traceback);
        PyErr_SetString(PyExc_SystemError, "a step failed without an exception");
        return NULL;
    }
    if (traceback != NULL)
        PyException_SetTraceback(value, traceback);
    Py_XDECREF(type);
    Py_XDECREF(traceback);
    return value;
}

/* _send's first step: whether the transport takes no more (1), or takes it (0). */
static int closing(Pipeline *p)
{
    PyObject *answer = PyObject_CallMethodNoArgs(p->transport, s_is_closing);
    if (answer == NULL)
        return -1;
    int is = PyObject_IsTrue(answer);
    Py_DECREF(answer);
    return is;
}

/* Connection._write of a response of one chunk (bytes: no file slice in it): the bytes
 * counted, the connection's last I/O time, transport.write. True, or the exception a step
 * raised (the connection raises it, as _write would). */
static PyObject *sent(Pipeline *p, PyObject *chunk)
{
    PyObject *count, *sum, *now_, *done;
    if ((count = slot(p->metrics, metrics_at[MT_BYTES_OUT])) == NULL)
        return raised();
    PyObject *size = PyLong_FromSsize_t(PyBytes_GET_SIZE(chunk));
    if (size == NULL)
        return raised();
    sum = PyNumber_Add(count, size);
    Py_DECREF(size);
    if (sum == NULL)
        return raised();
    Py_SETREF(SLOT(p->metrics, metrics_at[MT_BYTES_OUT]), sum);
    if ((now_ = PyObject_CallNoArgs(p->loop_time)) == NULL)
        return raised();
    Py_XSETREF(SLOT(p->connection, connection_at[C_LAST_ACTIVE]), now_);
    if ((done = PyObject_CallMethodOneArg(p->transport, s_write, chunk)) == NULL)
        return raised();
    Py_DECREF(done);
    Py_RETURN_TRUE;
}

/* What serve answers, unpacked: take reads it without the tuple being made. */
typedef struct {
    PyObject *header, *api, *body, *ctx, *response, *out;
} Served;

static void let_go(Served *s)
{
    Py_CLEAR(s->header);
    Py_CLEAR(s->api);
    Py_CLEAR(s->body);
    Py_CLEAR(s->ctx);
    Py_CLEAR(s->response);
    Py_CLEAR(s->out);
}

/* serve's tuple, made of `s` (its references let go of). */
static PyObject *packed(Served *s)
{
    PyObject *result = PyTuple_Pack(6, s->header, s->api, s->body, s->ctx, s->response, s->out);
    let_go(s);
    return result;
}

/* serve's steps: 1 with *s set (new references), 0 for the Python path to serve the frame
 * (nothing done), -1 with an exception. */
static int serve_frame(Pipeline *p, PyObject *frame, Served *s)
{
    if (p->routes == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Pipeline not initialised");
        return -1;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE) < 0)
        return -1;
    Py_ssize_t size = view.len;
    unsigned int key_bits = 0, version_bits = 0;
    if (size >= 4) {
        const unsigned char *b = view.buf;
        key_bits = ((unsigned int)b[0] << 8) | b[1];
        version_bits = ((unsigned int)b[2] << 8) | b[3];
    }
    PyBuffer_Release(&view);
    if (size < 4 || size > INLINE_MAX)
        return 0;  /* under 4 bytes: no header; the Python path refuses it */
    PyObject *route_key = PyLong_FromUnsignedLong(((unsigned long)key_bits << 16) | version_bits);
    if (route_key == NULL)
        return -1;
    PyObject *route = PyDict_GetItemWithError(p->routes, route_key);  /* borrowed */
    Py_DECREF(route_key);
    if (route == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyTuple_Check(route) || PyTuple_GET_SIZE(route) != 5 || !PyTuple_Check(PyTuple_GET_ITEM(route, 3))
            || PyTuple_GET_SIZE(PyTuple_GET_ITEM(route, 3)) != 2) {
        PyErr_SetString(PyExc_TypeError, "a route is (api, request class, handler, (key, version), may wait)");
        return -1;
    }
    if (PyTuple_GET_ITEM(route, 4) == Py_True)
        return 0;  /* Dispatcher.can_handle_now: a handler that may wait */
    Py_INCREF(route);  /* held from here on: whatever runs below may change `routes` */
    PyObject *armed = PyObject_GetAttr(p->faults, s_armed);
    int is_armed = armed == NULL ? -1 : PyObject_IsTrue(armed);
    Py_XDECREF(armed);
    if (is_armed != 0) {
        Py_DECREF(route);
        return is_armed < 0 ? -1 : 0;  /* Dispatcher.can_handle_now: faults set, which may delay the answer */
    }
    PyObject *api = PyTuple_GET_ITEM(route, 0), *cls = PyTuple_GET_ITEM(route, 1);
    PyObject *handler = PyTuple_GET_ITEM(route, 2), *pair = PyTuple_GET_ITEM(route, 3);
    PyObject *header = NULL, *body = NULL, *ctx = NULL, *response = NULL, *out = NULL;
    int result = -1;

    header = PyObject_CallOneArg(parse_header, frame);
    if (header == NULL || !PyTuple_Check(header) || PyTuple_GET_SIZE(header) != 5) {
        PyErr_Clear();  /* refused: the Python path refuses it and says why */
        result = 0;
        goto done;
    }
    PyObject *decode_args[3] = {cls, frame, PyTuple_GET_ITEM(header, 4)};
    body = PyObject_Vectorcall(decode, decode_args, 3, NULL);
    if (body == NULL || body == Py_None) {
        PyErr_Clear();  /* refused, or left to kio's reader: the Python path's */
        result = 0;
        goto done;
    }
    ctx = context_of(p, header);
    if (ctx == NULL)
        goto done;
    double started = now();
    PyObject *handler_args[2] = {ctx, body};
    response = PyObject_Vectorcall(handler, handler_args, 2, NULL);
    if (response == NULL)
        goto done;
    if (Py_IS_TYPE(response, &PyCoro_Type)) {
        out = PyFloat_FromDouble(started);
        if (out == NULL)
            goto done;
    } else {
        if (PyDict_CheckExact(response)) {  /* a response view's values: its entity */
            PyObject *build = PyDict_GetItemWithError(builders, pair);  /* borrowed */
            PyObject *entity;
            if (build != NULL)
                entity = PyObject_CallOneArg(build, response);
            else if (PyErr_Occurred())
                goto done;
            else
                entity = PyObject_CallMethodOneArg(ctx, s_entity, response);
            if (entity == NULL)
                goto done;
            Py_SETREF(response, entity);
        }
        if (count_served(p, PyTuple_GET_ITEM(pair, 0), now() - started, response) < 0)
            goto done;
        int is_closing = response == Py_None ? 1 : closing(p);
        if (is_closing < 0)
            goto done;
        if (is_closing)
            out = Py_NewRef(Py_None);  /* no response, or no one to send it to: _send sends nothing */
        else if ((out = encoded(PyTuple_GET_ITEM(header, 2), response)) == NULL)
            goto done;
        else if (PyList_CheckExact(out) && PyList_GET_SIZE(out) == 1 && PyBytes_CheckExact(PyList_GET_ITEM(out, 0))) {
            PyObject *chunk = Py_NewRef(PyList_GET_ITEM(out, 0));
            Py_SETREF(out, sent(p, chunk));
            Py_DECREF(chunk);
            if (out == NULL)
                goto done;
        }
    }
    *s = (Served){header, Py_NewRef(api), body, ctx, response, out};  /* the references handed over */
    header = body = ctx = response = out = NULL;
    result = 1;
done:
    Py_XDECREF(header);
    Py_XDECREF(body);
    Py_XDECREF(ctx);
    Py_XDECREF(response);
    Py_XDECREF(out);
    Py_DECREF(route);
    return result;
}

static PyObject *serve(Pipeline *p, PyObject *frame)
{
    Served s;
    int served = serve_frame(p, frame, &s);
    if (served <= 0)
        return served < 0 ? NULL : Py_NewRef(Py_None);
    return packed(&s);
}

/* The slot at `offset` of `owner` (borrowed), or NULL with AttributeError if it was never set. */
static PyObject *slot(PyObject *owner, Py_ssize_t offset)
{
    PyObject *value = SLOT(owner, offset);
    if (value == NULL)
        PyErr_Format(PyExc_AttributeError, "a slot of %s that take reads is not set", Py_TYPE(owner)->tp_name);
    return value;
}

/* The slot at `offset` of `owner` if it holds an instance of `type` (the class whose layout
 * configure_take was given), or NULL with an exception: the other slots are read at that
 * class's offsets. */
static PyObject *typed_slot(PyObject *owner, Py_ssize_t offset, PyTypeObject *type)
{
    PyObject *value = slot(owner, offset);
    if (value != NULL && !PyObject_TypeCheck(value, type)) {
        PyErr_Format(PyExc_TypeError, "take reads a %s where a %s was laid out", Py_TYPE(value)->tp_name,
                     type->tp_name);
        return NULL;
    }
    return value;
}

/* The slot as a C long: 0 and *value set, or -1 with an exception. */
static int long_slot(PyObject *owner, Py_ssize_t offset, long long *value)
{
    PyObject *found = slot(owner, offset);
    if (found == NULL)
        return -1;
    *value = PyLong_AsLongLong(found);
    return *value == -1 && PyErr_Occurred() ? -1 : 0;
}

/* Whether the slot holds None (1), something else (0), or is unset (-1). */
static int none_slot(PyObject *owner, Py_ssize_t offset)
{
    PyObject *found = slot(owner, offset);
    return found == NULL ? -1 : found == Py_None;
}

/* Whether the slot's value is true (1), false (0), or failed (-1). */
static int true_slot(PyObject *owner, Py_ssize_t offset)
{
    PyObject *found = slot(owner, offset);
    return found == NULL ? -1 : PyObject_IsTrue(found);
}

/* Whether len() of the slot's value is 0 (1), not (0), or failed (-1). */
static int empty_slot(PyObject *owner, Py_ssize_t offset)
{
    PyObject *found = slot(owner, offset);
    if (found == NULL)
        return -1;
    Py_ssize_t size = PyObject_Length(found);
    return size < 0 ? -1 : size == 0;
}

/* Whether getattr(owner, name) is true (1), false (0), or failed (-1). */
static int true_attr(PyObject *owner, PyObject *name)
{
    PyObject *found = PyObject_GetAttr(owner, name);
    if (found == NULL)
        return -1;
    int is = PyObject_IsTrue(found);
    Py_DECREF(found);
    return is;
}

/* _take's conditions for serving `data` (n bytes, its size prefix saying n - 4) at once:
 * the frame reader between frames with nothing held (so feed's first case gives the
 * frame, and settle has nothing to account), the request memory with room, the worker
 * waiting with nothing queued or unfinished, the client reading, no throttle, the
 * connection open, no answer being sent from files. 1 if they hold, 0 if not, -1 failed.
 * Each is read at its slot's offset (configure_take). */
static int may_take(Pipeline *p, Py_ssize_t size)
{
    PyObject *connection = p->connection, *intake, *reader, *memory, *wakeup, *sender;
    int is;
    long long value, limit;
#define CHECK(condition) do { is = (condition); if (is <= 0) return is; } while (0)
    if ((intake = typed_slot(connection, connection_at[C_INTAKE], intake_type)) == NULL
            || (reader = typed_slot(intake, intake_at[I_READER], reader_type)) == NULL
            || long_slot(reader, reader_at[R_SIZE], &value) < 0)
        return -1;
    CHECK(value < 0);  /* no frame half received */
    CHECK(empty_slot(reader, reader_at[R_PREFIX]));
    CHECK(empty_slot(reader, reader_at[R_BACKLOG]));
    if (long_slot(reader, reader_at[R_MAX_BYTES], &value) < 0)
        return -1;
    CHECK(size - 4 <= value);
    if ((is = true_slot(intake, intake_at[I_POOLED])) < 0)
        return -1;
    if (is) {  /* RequestMemory.full: 0 < limit <= used */
        if ((memory = typed_slot(intake, intake_at[I_MEMORY], memory_type)) == NULL
                || long_slot(memory, memory_at[M_LIMIT], &limit) < 0 || long_slot(memory, memory_at[M_USED], &value) < 0)
            return -1;
        CHECK(!(0 < limit && limit <= value));
    }
    if (long_slot(intake, intake_at[I_HELD], &value) < 0)
        return -1;
    CHECK(value == 0);
    CHECK(empty_slot(intake, intake_at[I_FRAMES]));
    if ((wakeup = slot(connection, connection_at[C_WAKEUP])) == NULL)
        return -1;
    CHECK(wakeup != Py_None);
    PyObject *done = PyObject_CallMethodNoArgs(wakeup, s_done);
    if (done == NULL)
        return -1;
    is = PyObject_IsTrue(done);
    Py_DECREF(done);
    CHECK(is < 0 ? -1 : !is);
    /* Implied by the wake-up's check while connection.py keeps its order (it wakes the worker
     * whenever it leaves a request unfinished, and the worker lets go of it before it waits
     * again); kept, for a slot's pointer compare, so that take's conditions are _take's. */
    CHECK(none_slot(connection, connection_at[C_UNFINISHED]));
    CHECK(none_slot(connection, connection_at[C_DRAINED]));
    CHECK(none_slot(connection, connection_at[C_MUTED]));
    is = true_slot(connection, connection_at[C_CLOSING]);
    CHECK(is < 0 ? -1 : !is);
    if ((sender = slot(connection, connection_at[C_FILE_SENDER])) == NULL)
        return -1;
    if (sender != Py_None) {
        if (!PyObject_TypeCheck(sender, sender_type))
            return typed_slot(connection, connection_at[C_FILE_SENDER], sender_type) == NULL ? -1 : 0;
        CHECK(none_slot(sender, sender_at[S_FINISHED]));
    }
#undef CHECK
    return 1;
}

/* data_received's first steps: metrics.bytes_in += len(data); last_active = loop time. */
static int received(Pipeline *p, PyObject *data)
{
    PyObject *count = slot(p->metrics, metrics_at[MT_BYTES_IN]), *size, *sum, *now_;
    if (count == NULL)
        return -1;
    Py_ssize_t length = PyObject_Length(data);
    if (length < 0 || (size = PyLong_FromSsize_t(length)) == NULL)
        return -1;
    sum = PyNumber_Add(count, size);
    Py_DECREF(size);
    if (sum == NULL)
        return -1;
    Py_SETREF(SLOT(p->metrics, metrics_at[MT_BYTES_IN]), sum);
    if ((now_ = PyObject_CallNoArgs(p->loop_time)) == NULL)
        return -1;
    Py_XSETREF(SLOT(p->connection, connection_at[C_LAST_ACTIVE]), now_);
    return 0;
}

/* serve's tuple for _take to finish, or the exception making it raised, as the handler's. */
static PyObject *handed(Served *s)
{
    PyObject *result = packed(s);
    return result == NULL && PyErr_ExceptionMatches(PyExc_Exception) ? raised() : result;
}

static PyObject *take(Pipeline *p, PyObject *data)
{
    if (p->routes == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Pipeline not initialised");
        return NULL;
    }
    if (received(p, data) < 0)
        return NULL;
    if (!PyBytes_CheckExact(data) || PyBytes_GET_SIZE(data) <= 4)
        Py_RETURN_NONE;
    Py_ssize_t size = PyBytes_GET_SIZE(data);
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(data);
    int32_t prefix = (int32_t)(((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | b[3]);
    if ((Py_ssize_t)prefix != size - 4)
        Py_RETURN_NONE;  /* not exactly one whole frame */
    int may = may_take(p, size);
    if (may < 0)
        return NULL;
    if (!may)
        Py_RETURN_NONE;
    /* memoryview(data)[4:], made as memoryview's slicing makes it (init_slice, init_len:
     * the view's start, shape and length moved on by 4) on the view just made, which no one
     * else has seen: a second memoryview and the slice's object saved at every request */
    PyObject *frame = PyMemoryView_FromObject(data);
    if (frame == NULL)
        return NULL;
    Py_buffer *view = PyMemoryView_GET_BUFFER(frame);
    if (view->ndim == 1 && view->itemsize == 1 && view->shape != NULL && view->shape[0] == size
            && (view->strides == NULL || view->strides[0] == 1) && view->suboffsets == NULL) {
        view->buf = (char *)view->buf + 4;
        view->shape[0] -= 4;
        view->len -= 4;
    } else {
        Py_SETREF(frame, PyObject_GetItem(frame, after_prefix));
        if (frame == NULL)
            return NULL;
    }
    Served s;
    int served = serve_frame(p, frame, &s);
    Py_DECREF(frame);
    if (served < 0)
        return PyErr_ExceptionMatches(PyExc_Exception) ? raised() : NULL;  /* the handler's, for _take */
    if (served == 0)
        Py_RETURN_NONE;
    /* Done with it here when nothing is left for _take but the handler's deferred work:
     * the response sent (or none), no throttle, no close after it. */
    PyObject *throttle = *(PyObject **)((char *)s.ctx + context_offsets[6]);
    PyObject *deferred = *(PyObject **)((char *)s.ctx + context_offsets[5]);
    if ((s.out != Py_True && s.out != Py_None) || throttle == NULL || deferred == NULL
            || (deferred != Py_None && !PyList_CheckExact(deferred)))
        return handed(&s);
    int throttled = PyObject_IsTrue(throttle);  /* _responded's `if ctx.throttle_ms` */
    if (throttled != 0) {
        PyErr_Clear();
        return handed(&s);
    }
    /* A transport closing since is nothing more for _take either: it would stop there, with
     * nothing queued or held to account (may_take saw to that). */
    int close = true_attr(p->session, s_close_after_response);
    if (close != 0) {
        PyErr_Clear();  /* _take asks again, and raises it where it raises */
        return handed(&s);
    }
    Py_XSETREF(SLOT(p->connection, connection_at[C_CLIENT_ID]), Py_NewRef(PyTuple_GET_ITEM(s.header, 3)));
    if (deferred != Py_None) {
        /* _responded's one step left (EndTxn's markers and completion): the deferred work,
         * run by Connection._run_deferred(ctx, api.name), which logs what fails, right after
         * the response was handed to the transport and before anything else runs, as
         * _take would run it; nothing else is left for _take (the checks above, and
         * may_take's: nothing held, queued or unfinished, so its settle has nothing to
         * account). */
        PyObject *name = PyObject_GetAttr(s.api, s_name), *ran = NULL;
        if (name != NULL) {
            ran = PyObject_CallMethodObjArgs(p->connection, s_run_deferred, s.ctx, name, NULL);
            Py_DECREF(name);
        }
        let_go(&s);
        if (ran == NULL)
            return NULL;  /* not an Exception (_run_deferred logs those): out of data_received, as out of _take */
        Py_DECREF(ran);
        Py_RETURN_TRUE;
    }
    let_go(&s);
    Py_RETURN_TRUE;
}

static PyMethodDef pipeline_methods[] = {
    {"take", (PyCFunction)take, METH_O,
     "take(data) -> None, True, serve's tuple or the handler's exception (see the file's comment)"},
    {"serve", (PyCFunction)serve, METH_O,
     "serve(frame) -> (header, api, body, ctx, response, out), or None for the Python path to serve it"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject PipelineType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ottla.broker.network._pipeline.Pipeline",
    .tp_basicsize = sizeof(Pipeline),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The inline request path of one connection (Connection._serve_inline's steps).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)pipeline_init,
    .tp_dealloc = (destructor)pipeline_dealloc,
    .tp_traverse = (traverseproc)pipeline_traverse,
    .tp_clear = (inquiry)pipeline_clear,
    .tp_methods = pipeline_methods,
};

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS, "configure(...): what Pipeline.serve calls (see the file's comment)"},
    {"configure_encoded", configure_encoded, METH_O,
     "configure_encoded((Encoded, (entity, flexible, body offsets))): a response encoded ahead of time"},
    {"configure_take", configure_take, METH_O,
     "configure_take(layout): the slots Pipeline.take reads and writes (see the file's comment)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pipeline", NULL, -1, methods};

PyMODINIT_FUNC PyInit__pipeline(void)
{
    struct { PyObject **name; const char *text; } names[] = {
        {&s_armed, "armed"}, {&s_apis, "apis"}, {&s_update, "update"}, {&s_entity, "entity"},
        {&s_request_served, "request_served"}, {&s_is_closing, "is_closing"}, {&s_write, "write"},
        {&s_done, "done"}, {&s_close_after_response, "close_after_response"}, {&s_name, "name"},
        {&s_run_deferred, "_run_deferred"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((*names[i].name = PyUnicode_InternFromString(names[i].text)) == NULL)
            return NULL;
    if ((one = PyLong_FromLong(1)) == NULL || (plans = PyDict_New()) == NULL)
        return NULL;
    PyObject *four = PyLong_FromLong(4);
    if (four == NULL)
        return NULL;
    after_prefix = PySlice_New(four, Py_None, NULL);
    Py_DECREF(four);
    if (after_prefix == NULL)
        return NULL;
    if (PyType_Ready(&PipelineType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Pipeline", (PyObject *)&PipelineType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
