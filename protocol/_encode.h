/* What the C encoders of Kafka's formats share (protocol/_coordinator_batch.c,
 * coordinator/_transaction_value.c): big-endian integers and varints, written at `out`.
 * Header-only, each function static inline: every extension is built on its own. */

#ifndef OTTLA_ENCODE_H
#define OTTLA_ENCODE_H

#include <Python.h>
#include <stdint.h>

/* The unsigned varint of `v` (Kafka's compact lengths), its bytes written at `out`
 * (NULL: only counted); returns how many. */
static inline Py_ssize_t put_uvarint(unsigned char *out, uint64_t v)
{
    Py_ssize_t n = 0;
    while (v >= 0x80) {
        if (out != NULL)
            out[n] = (unsigned char)(v | 0x80);
        v >>= 7;
        n++;
    }
    if (out != NULL)
        out[n] = (unsigned char)v;
    return n + 1;
}

/* The zigzag varint of `value` (a record's fields), as put_uvarint writes it. */
static inline Py_ssize_t put_varint(unsigned char *out, int64_t value)
{
    return put_uvarint(out, ((uint64_t)value << 1) ^ (uint64_t)(value >> 63));
}

/* `value`'s low `bytes` bytes, big-endian, at `out`; returns the end of what it wrote. */
static inline unsigned char *put_be(unsigned char *out, uint64_t value, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--) {
        out[i] = (unsigned char)value;
        value >>= 8;
    }
    return out + bytes;
}

#endif
