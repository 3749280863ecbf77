/* Writing a batch to a segment's log file, for the append path: storage/batch_write.py's
 * write_batch_in_python in C.
 *
 * write_batch(fd, batch, base_offset, leader_epoch) writes `batch` at the end of the file
 * open as `fd` (O_APPEND) with its first 16 bytes replaced: baseOffset (int64),
 * batchLength (int32, the batch's length less the 12 bytes of offset and length) and
 * partitionLeaderEpoch (int32), all big-endian. None of them is covered by the CRC, so
 * the batch stays valid. It answers the bytes written, as os.writev does: one writev of
 * the 16 new bytes and the batch from its magic byte on, the batch's bytes not copied.
 * The Python twin packs the prefix with batch.OFFSET_LENGTH_EPOCH and writes it with
 * os.writev, making a list, a bytes and two memoryviews a batch: here none is made.
 *
 * As the twin, it answers struct.error for an offset, epoch or length that does not fit
 * its field (the batch is then not written), and OSError for a failed write, retrying
 * one a signal interrupted (PEP 475, as os.writev does); the GIL is let go of during the
 * write, as os.writev lets go of it. A batch shorter than 16 bytes is written as the
 * twin writes it: the 16 new bytes alone.
 * tests/unit/test_batch_write.py holds the two to the same answers and the same files.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <sys/uio.h>

/* The fields before magic: baseOffset, batchLength, partitionLeaderEpoch. */
#define MAGIC_OFFSET 16
#define LOG_OVERHEAD 12

static PyObject *struct_error = NULL; /* struct.error, what the twin's pack raises */

static void put_be(unsigned char *out, uint64_t value, int size)
{
    for (int i = size - 1; i >= 0; i--) {
        out[i] = (unsigned char)(value & 0xff);
        value >>= 8;
    }
}

/* `value` as an int64 in [low, high], or -1 with struct.error set (as struct.pack). */
static int in_range(PyObject *value, long long low, long long high, long long *out)
{
    PyObject *index = PyNumber_Index(value);
    if (index == NULL) {
        PyErr_Clear();
        PyErr_SetString(struct_error, "required argument is not an integer");
        return -1;
    }
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
    Py_DECREF(index);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || v < low || v > high) {
        PyErr_SetString(struct_error, "argument out of range");
        return -1;
    }
    *out = v;
    return 0;
}

static PyObject *write_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "write_batch(fd, batch, base_offset, leader_epoch)");
        return NULL;
    }
    /* Checked in the twin's order: the batch, the three fields, then the descriptor. */
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    long long base_offset, leader_epoch, length = (long long)view.len - LOG_OVERHEAD;
    int fd = -1;
    if (in_range(args[2], INT64_MIN, INT64_MAX, &base_offset) < 0)
        goto refused;
    if (length > INT32_MAX) {
        PyErr_SetString(struct_error, "argument out of range");
        goto refused;
    }
    if (in_range(args[3], INT32_MIN, INT32_MAX, &leader_epoch) < 0 || (fd = PyObject_AsFileDescriptor(args[0])) < 0)
        goto refused;
    unsigned char prefix[MAGIC_OFFSET];
    put_be(prefix, (uint64_t)base_offset, 8);
    put_be(prefix + 8, (uint64_t)(uint32_t)(int32_t)length, 4);
    put_be(prefix + 12, (uint64_t)(uint32_t)(int32_t)leader_epoch, 4);
    struct iovec iov[2] = {{prefix, MAGIC_OFFSET}, {NULL, 0}};
    int count = 1;
    if (view.len > MAGIC_OFFSET) {
        iov[1].iov_base = (char *)view.buf + MAGIC_OFFSET;
        iov[1].iov_len = (size_t)(view.len - MAGIC_OFFSET);
        count = 2;
    }
    ssize_t written;
    int error;
    do {
        Py_BEGIN_ALLOW_THREADS
        written = writev(fd, iov, count);
        Py_END_ALLOW_THREADS
        error = errno;
    } while (written < 0 && error == EINTR && !PyErr_CheckSignals());
    PyBuffer_Release(&view);
    if (written < 0) {
        if (!PyErr_Occurred()) {
            errno = error;
            PyErr_SetFromErrno(PyExc_OSError);
        }
        return NULL;
    }
    return PyLong_FromSsize_t(written);
refused:
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef methods[] = {
    {"write_batch", (PyCFunction)(void (*)(void))write_batch, METH_FASTCALL,
     "write_batch(fd, batch, base_offset, leader_epoch) -> bytes written: the batch with its offset, length "
     "and leader epoch, in one writev"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_batch_write", NULL, -1, methods};

PyMODINIT_FUNC PyInit__batch_write(void)
{
    PyObject *struct_module = PyImport_ImportModule("struct");
    if (struct_module == NULL)
        return NULL;
    struct_error = PyObject_GetAttrString(struct_module, "error");
    Py_DECREF(struct_module);
    if (struct_error == NULL)
        return NULL;
    return PyModule_Create(&module);
}
