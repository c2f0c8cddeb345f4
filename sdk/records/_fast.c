/* The compiled fast path (sdk.records.fast_path): the per-record work of the consumer's
 * decoder and of the producer's send, each the twin of a pure-Python function that stays
 * the pure path and the reference the tests compare it with:
 *
 *   decode         consumer_records._decode_pure (records bytes -> ConsumerRecords)
 *   encode_values  RecordBatchBuilder.append_values (keyless staged records -> batch bytes)
 *   Stager         Stage.stager's function (a plain send staged into its topic's run)
 *   SlotMaker      RecordMetadata (any slotted class) built without its frozen __init__
 *
 * decode(buf, pos, end, count, base_offset, base_ts, topic, partition, ts_type, epoch, cls)
 * is consumer_records._decode in C: the records section of a RecordBatch v2 (already
 * decompressed, as `bytes`) straight to ConsumerRecord objects. It follows the pure loop
 * step by step -- the same reads, bounds and checks in the same order -- so it returns the
 * same objects and raises MalformedDataError with the same messages on the same inputs.
 *
 * Varint values are decoded into 128-bit integers: a 10-byte varint carries 70 bits, which
 * the pure path turns into a Python int of any size; values outside int64 are rebuilt as
 * Python ints so even absurd timestamp deltas match.
 *
 * Records are allocated with cls->tp_alloc and their slots written directly, at offsets read
 * once from ConsumerRecord's slot descriptors (init()); a subclass (the share consumer's)
 * shares those offsets. All of this builds Python objects, so the GIL is held throughout.
 *
 * Records and their headers lists are untracked by the cyclic garbage collector, as
 * CPython untracks tuples and dicts of atomic values: they hold strs, ints, bytes, None
 * and (str, bytes) tuples, so they cannot be part of a cycle, and every collection that
 * ran while a consumer buffered records traversed all of them (about two thirds of the
 * consumer's CPU time at 100 B). Reference counting still frees them. A record whose key
 * or value a deserializer replaced by an object that refers back to the record would form
 * a cycle the collector never sees (ConsumerRecord is documented read-only; the
 * deserializers' objects are the user's values).
 *
 * encode_values(...) is the producer's bulk encoding (RecordBatchBuilder.append_values):
 * keyless, header-less records written straight into the batch's bytearray. It holds the
 * GIL too: it reads the caller's lists and resizes a bytearray others may reference.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <time.h>

#ifndef __SIZEOF_INT128__
#error "needs a 128-bit integer type (gcc or clang); the pure-Python path is used instead"
#endif

typedef __int128 i128;

enum { F_TOPIC, F_PARTITION, F_OFFSET, F_KEY, F_VALUE, F_HEADERS, F_TIMESTAMP, F_TS_TYPE,
       F_KEY_SIZE, F_VALUE_SIZE, F_EPOCH, F_COUNT };

static const char *const FIELD_NAMES[F_COUNT] = {
    "topic", "partition", "offset", "key", "value", "headers", "timestamp",
    "timestamp_type", "serialized_key_size", "serialized_value_size", "leader_epoch"};

static Py_ssize_t field_offset[F_COUNT];
static PyTypeObject *record_base = NULL;  /* ConsumerRecord */
static PyObject *malformed = NULL;        /* sdk.errors.MalformedDataError */

/* Set MalformedDataError(message); returns -1 for `return fail(...)`. */
static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (msg != NULL) {
        PyErr_SetObject(malformed, msg);
        Py_DECREF(msg);
    }
    return -1;
}

/* A 128-bit value as a Python int (exact, like the pure path's arbitrary precision). */
static PyObject *long_from_i128(i128 v) {
    if (v >= INT64_MIN && v <= INT64_MAX)
        return PyLong_FromLongLong((long long)v);
    int neg = v < 0;
    unsigned __int128 u = neg ? (unsigned __int128)(-v) : (unsigned __int128)v;
    PyObject *hi = PyLong_FromUnsignedLongLong((unsigned long long)(u >> 64));
    PyObject *lo = PyLong_FromUnsignedLongLong((unsigned long long)u);
    PyObject *sh = PyLong_FromLong(64), *hs = NULL, *sum = NULL, *out = NULL;
    if (hi && lo && sh && (hs = PyNumber_Lshift(hi, sh)) && (sum = PyNumber_Or(hs, lo)))
        out = neg ? PyNumber_Negative(sum) : (Py_INCREF(sum), sum);
    Py_XDECREF(hi); Py_XDECREF(lo); Py_XDECREF(sh); Py_XDECREF(hs); Py_XDECREF(sum);
    return out;
}

/* "%lld" of a 128-bit value for messages (values past int64 are formatted via Python). */
static PyObject *i128_str(i128 v) {
    PyObject *n = long_from_i128(v);
    if (n == NULL) return NULL;
    PyObject *s = PyObject_Str(n);
    Py_DECREF(n);
    return s;
}

/* _varint.decode_varint: a signed zig-zag varint of up to 10 bytes, bounded by `end`. */
static int slow_varint(const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end, i128 *out) {
    unsigned __int128 z = 0;
    int shift = 0;
    Py_ssize_t p = *pos;
    for (;;) {
        if (p >= end)
            return fail("data ends inside a varint at offset %zd", p);
        unsigned char c = b[p++];
        z |= (unsigned __int128)(c & 0x7F) << shift;
        if (c < 0x80) {
            *out = (i128)(z >> 1) ^ -(i128)(z & 1);
            *pos = p;
            return 0;
        }
        shift += 7;
        if (shift >= 70)
            return fail("varint at offset %zd is longer than 10 bytes", p - 10);
    }
}

static int fail_i128(const char *before, i128 v, const char *after) {
    PyObject *s = i128_str(v);
    if (s == NULL) return -1;
    int r = fail("%s%U%s", before, s, after);
    Py_DECREF(s);
    return r;
}

/* reader.decode_headers: the header list of one record, every read bounded by `end`. */
static PyObject *decode_headers(const char *buf, Py_ssize_t *pos, Py_ssize_t end) {
    const unsigned char *b = (const unsigned char *)buf;
    i128 n;
    if (slow_varint(b, pos, end, &n) < 0) return NULL;
    if (n < 0 || n * 2 > (i128)(end - *pos)) {
        PyObject *s = i128_str(n);
        if (s != NULL) {
            fail("record claims %U headers in %zd bytes", s, end - *pos);
            Py_DECREF(s);
        }
        return NULL;
    }
    PyObject *headers = PyList_New(0);
    if (headers == NULL) return NULL;
    for (i128 i = 0; i < n; i++) {
        i128 kl, vl;
        if (slow_varint(b, pos, end, &kl) < 0) goto error;
        if (kl < 0 || kl > (i128)(end - *pos)) {
            fail_i128("header key length ", kl, " is negative or past the record");
            goto error;
        }
        PyObject *hkey = PyUnicode_DecodeUTF8(buf + *pos, (Py_ssize_t)kl, NULL);
        if (hkey == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyObject *type, *exc, *tb;
                PyErr_Fetch(&type, &exc, &tb);
                PyErr_NormalizeException(&type, &exc, &tb);
                PyObject *s = exc ? PyObject_Str(exc) : NULL;
                Py_XDECREF(type); Py_XDECREF(exc); Py_XDECREF(tb);
                if (s != NULL) {
                    fail("header key is not UTF-8: %U", s);
                    Py_DECREF(s);
                }
            }
            goto error;
        }
        *pos += (Py_ssize_t)kl;
        if (slow_varint(b, pos, end, &vl) < 0) { Py_DECREF(hkey); goto error; }
        PyObject *hval;
        if (vl < 0) {
            if (vl != -1) {
                Py_DECREF(hkey);
                fail_i128("header value length ", vl, " is negative");
                goto error;
            }
            hval = Py_NewRef(Py_None);
        } else {
            if (vl > (i128)(end - *pos)) {
                Py_DECREF(hkey);
                fail_i128("header value of ", vl, " bytes runs past the record");
                goto error;
            }
            hval = PyBytes_FromStringAndSize(buf + *pos, (Py_ssize_t)vl);
            if (hval == NULL) { Py_DECREF(hkey); goto error; }
            *pos += (Py_ssize_t)vl;
        }
        PyObject *pair = PyTuple_New(2);
        if (pair == NULL) { Py_DECREF(hkey); Py_DECREF(hval); goto error; }
        PyTuple_SET_ITEM(pair, 0, hkey);
        PyTuple_SET_ITEM(pair, 1, hval);
        int r = PyList_Append(headers, pair);
        Py_DECREF(pair);
        if (r < 0) goto error;
    }
    return headers;
error:
    Py_DECREF(headers);
    return NULL;
}

/* Store `value` (a new reference, stolen) in slot `f` of a fresh record. */
static inline void set_slot(PyObject *rec, int f, PyObject *value) {
    PyObject **slot = (PyObject **)((char *)rec + field_offset[f]);
    PyObject *old = *slot;
    *slot = value;
    Py_XDECREF(old);
}

/* base + delta as a Python int, exact (the pure path adds Python ints). */
static PyObject *add_delta(long long base, PyObject *base_obj, i128 delta) {
    long long r;
    if (delta >= INT64_MIN && delta <= INT64_MAX &&
        !__builtin_add_overflow(base, (long long)delta, &r))
        return PyLong_FromLongLong(r);
    PyObject *d = long_from_i128(delta);
    if (d == NULL) return NULL;
    PyObject *sum = PyNumber_Add(base_obj, d);
    Py_DECREF(d);
    return sum;
}

/* One varint the way the pure loop reads it: one byte and the non-negative two-byte form
   inline, anything else through slow_varint bounded by `bound`. Returns 1 when the read
   ran past the buffer (the pure loop's IndexError), -1 on error, 0 otherwise. */
static inline int read_len(const unsigned char *b, Py_ssize_t len, Py_ssize_t *pos,
                           Py_ssize_t bound, i128 *out) {
    Py_ssize_t p = *pos;
    if (p >= len) return 1;
    unsigned char c = b[p];
    if (c < 128) {
        *out = (c >> 1) ^ -(i128)(c & 1);
        *pos = p + 1;
        return 0;
    }
    if (p + 1 >= len) return 1;  /* the pure loop reads buf[pos + 1] before deciding */
    unsigned char d = b[p + 1];
    if (d < 128 && !(c & 1)) {
        *out = (i128)(((c & 0x7F) >> 1) | (d << 6));
        *pos = p + 2;
        return 0;
    }
    return slow_varint(b, pos, bound, out);
}

static PyObject *fast_decode(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "decode() takes 11 arguments");
        return NULL;
    }
    if (record_base == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "sdk.records._fast.init() was not called");
        return NULL;
    }
    PyObject *bufobj = args[0];
    if (!PyBytes_CheckExact(bufobj)) {
        PyErr_SetString(PyExc_TypeError, "decode() reads bytes");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    Py_ssize_t count = PyLong_AsSsize_t(args[3]);
    long long base_offset = PyLong_AsLongLong(args[4]);
    long long base_ts = PyLong_AsLongLong(args[5]);
    if (PyErr_Occurred()) return NULL;
    PyObject *topic = args[6], *partition = args[7], *ts_type = args[8], *epoch = args[9];
    PyObject *cls = args[10];
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, record_base)) {
        PyErr_SetString(PyExc_TypeError, "cls must be ConsumerRecord or a subclass");
        return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)cls;
    const char *buf = PyBytes_AS_STRING(bufobj);
    const unsigned char *b = (const unsigned char *)buf;
    Py_ssize_t len = PyBytes_GET_SIZE(bufobj);
    if (pos < 0 || end > len || pos > end) {
        PyErr_SetString(PyExc_ValueError, "pos/end outside the buffer");
        return NULL;
    }

    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    Py_ssize_t rec_end = pos;
    for (Py_ssize_t i = 0; i < count; i++) {
        i128 ln, td, od, n;
        int r = read_len(b, len, &pos, end, &ln);
        if (r) goto varint_or_index;
        if (ln < 6 || ln > (i128)(end - pos)) {
            PyObject *s = i128_str(ln);
            if (s != NULL) {
                fail("record length %U at offset %zd is too short or runs past the batch",
                     s, pos);
                Py_DECREF(s);
            }
            goto error;
        }
        rec_end = pos + (Py_ssize_t)ln;
        /* attributes (unused), then the timestamp delta */
        if (pos + 1 >= len) goto index_error;
        if (b[pos + 1] < 128) {
            unsigned char c = b[pos + 1];
            td = (c >> 1) ^ -(i128)(c & 1);
            pos += 2;
        } else {
            pos += 1;
            if (slow_varint(b, &pos, rec_end, &td) < 0) goto error;
        }
        r = read_len(b, len, &pos, rec_end, &od);
        if (r) goto varint_or_index;

        PyObject *rec = tp->tp_alloc(tp, 0);
        if (rec == NULL) goto error;
        /* Out of the cyclic GC's lists (see the note at the top): it holds only atomic
         * values and its headers list, and the collections traversing every buffered
         * record cost more than decoding them. */
        PyObject_GC_UnTrack(rec);
        if (PyList_Append(out, rec) < 0) { Py_DECREF(rec); goto error; }
        Py_DECREF(rec);  /* the list holds it; a failure below drops it with the list */

        /* key, then value */
        for (int f = F_KEY; f <= F_VALUE; f++) {
            r = read_len(b, len, &pos, rec_end, &n);
            if (r) goto varint_or_index;
            if (n >= 0) {
                Py_ssize_t avail = len - pos;
                /* the pure slice is cut at the buffer's end and the next read fails */
                if (n > (i128)avail) goto index_error;
                PyObject *v = PyBytes_FromStringAndSize(buf + pos, (Py_ssize_t)n);
                if (v == NULL) goto error;
                set_slot(rec, f, v);
                pos += (Py_ssize_t)n;
            } else if (n == -1) {
                set_slot(rec, f, Py_NewRef(Py_None));
            } else {
                fail_i128(f == F_KEY ? "key length " : "value length ", n, " is negative");
                goto error;
            }
            PyObject *size = long_from_i128(n);
            if (size == NULL) goto error;
            set_slot(rec, f == F_KEY ? F_KEY_SIZE : F_VALUE_SIZE, size);
        }
        /* headers: a fresh list per record */
        if (pos >= len) goto index_error;
        PyObject *headers;
        if (b[pos] == 0) {
            headers = PyList_New(0);
            pos += 1;
        } else {
            headers = decode_headers(buf, &pos, rec_end);
        }
        if (headers == NULL) goto error;
        PyObject_GC_UnTrack(headers);  /* holds (str, bytes) tuples at most */
        set_slot(rec, F_HEADERS, headers);
        if (pos != rec_end) {
            fail("record ends at offset %zd, but its length says %zd", pos, rec_end);
            goto error;
        }
        set_slot(rec, F_TOPIC, Py_NewRef(topic));
        set_slot(rec, F_PARTITION, Py_NewRef(partition));
        PyObject *v = add_delta(base_offset, args[4], od);
        if (v == NULL) goto error;
        set_slot(rec, F_OFFSET, v);
        v = add_delta(base_ts, args[5], td);
        if (v == NULL) goto error;
        set_slot(rec, F_TIMESTAMP, v);
        set_slot(rec, F_TS_TYPE, Py_NewRef(ts_type));
        set_slot(rec, F_EPOCH, Py_NewRef(epoch));
        continue;
    varint_or_index:
        if (r < 0) goto error;
        goto index_error;
    }
    if (pos != end) {
        fail("%zd bytes follow the last of %zd records", end - pos, count);
        goto error;
    }
    return out;
index_error:
    fail("records end inside a record starting near offset %zd", rec_end);
error:
    Py_DECREF(out);
    return NULL;
}

/* ---------------------------------------------------------------- producer: bulk encoding */

/* Zig-zag varint of v at p; returns the bytes written (at most 10). */
static inline int put_varint(unsigned char *p, long long v) {
    unsigned long long z = ((unsigned long long)v << 1) ^ (unsigned long long)(v >> 63);
    int n = 0;
    while (z > 0x7F) {
        p[n++] = (unsigned char)((z & 0x7F) | 0x80);
        z >>= 7;
    }
    p[n++] = (unsigned char)z;
    return n;
}

static inline int varint_len(long long v) {
    unsigned char tmp[10];
    return put_varint(tmp, v);
}

/* encode_values(buf, used, values, timestamps, start, stop, room, base, od, count_before)
 * is RecordBatchBuilder.append_values's loop: keyless, header-less records values[i] at
 * timestamps[i] written into the bytearray buf from `used` on, until stop or until a record
 * would take `room` below zero (an empty batch -- count_before 0 and no record yet -- takes
 * its first record in any case). Returns (index reached, new used, next offset delta, the
 * largest timestamp written), or None when an input is outside what this loop handles (a
 * value that is not bytes, a timestamp outside int64): the caller then runs the pure loop,
 * which handles or reports it. Only bytes past `used` are written before that. */
static PyObject *fast_encode_values(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "encode_values() takes 10 arguments");
        return NULL;
    }
    PyObject *buf = args[0], *values = args[2], *stamps = args[3];
    if (!PyByteArray_CheckExact(buf) || !PyList_CheckExact(values) ||
        !PyList_CheckExact(stamps)) {
        PyErr_SetString(PyExc_TypeError, "encode_values() takes a bytearray and two lists");
        return NULL;
    }
    Py_ssize_t used = PyLong_AsSsize_t(args[1]);
    Py_ssize_t start = PyLong_AsSsize_t(args[4]);
    Py_ssize_t stop = PyLong_AsSsize_t(args[5]);
    long long room = PyLong_AsLongLong(args[6]);
    long long base = PyLong_AsLongLong(args[7]);
    long long od = PyLong_AsLongLong(args[8]);
    long long count_before = PyLong_AsLongLong(args[9]);
    if (PyErr_Occurred()) return NULL;
    if (start < 0 || stop > PyList_GET_SIZE(values) || stop > PyList_GET_SIZE(stamps) ||
        used < 0 || used > PyByteArray_GET_SIZE(buf) || od < 0 || od > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "encode_values() arguments out of range");
        return NULL;
    }
    long long first_od = od, top = INT64_MIN;
    Py_ssize_t i = start;
    for (; i < stop; i++) {
        PyObject *value = PyList_GET_ITEM(values, i);
        PyObject *stamp = PyList_GET_ITEM(stamps, i);
        if (!PyBytes_CheckExact(value) || !PyLong_CheckExact(stamp)) Py_RETURN_NONE;
        int overflow = 0;
        long long ts = PyLong_AsLongLongAndOverflow(stamp, &overflow);
        long long td;
        if (overflow || __builtin_sub_overflow(ts, base, &td)) Py_RETURN_NONE;
        Py_ssize_t n = PyBytes_GET_SIZE(value);
        /* attributes, timestamp delta, offset delta, null key, value length, value, 0 headers */
        long long body = 1 + varint_len(td) + varint_len(od) + 1 + varint_len(n) + n + 1;
        long long size = varint_len(body) + body;
        room -= size;
        if (room < 0 && (od > first_od || count_before)) break;  /* full */
        Py_ssize_t need = used + (Py_ssize_t)size;
        if (need > PyByteArray_GET_SIZE(buf) && PyByteArray_Resize(buf, need) < 0)
            return NULL;
        unsigned char *p = (unsigned char *)PyByteArray_AS_STRING(buf) + used;
        p += put_varint(p, body);
        *p++ = 0;
        p += put_varint(p, td);
        p += put_varint(p, od);
        *p++ = 1;  /* zig-zag -1: null key */
        p += put_varint(p, n);
        memcpy(p, PyBytes_AS_STRING(value), (size_t)n);
        p += n;
        *p = 0;
        used = need;
        if (ts > top) top = ts;
        od++;
    }
    return Py_BuildValue("(nnLL)", i, used, od, top);
}

/* ---------------------------------------------------------------- producer: staging */

/* Stager(pure, stage, runs, locked, run_type, future_type, value_limit, record_cost) is the
 * compiled twin of the producer's per-record send (sdk.producer.staging, Stage.stager): a
 * callable with send's arguments that stages a plain record -- an exact-str topic whose run
 * exists, a bytes value, a bytes key or none (or a key into a run that has keys already),
 * nothing else -- exactly as the pure function does: the send time appended to the run's
 * timestamps, the key (when the run keeps keys) and the value appended, stage.held raised
 * by their size plus record_cost, a StagedFuture returned (and on_delivery and the record's
 * position appended to the run's deliveries and delivery_pos). Every other call -- other arguments, unknown keywords,
 * a full, closed or locked stage, a topic without a run, a record above value_limit -- is
 * forwarded unchanged to `pure`, which decides, raises or falls back as it always did.
 *
 * Why no lock: this code holds the GIL from its first read of the stage to its last write
 * and runs no Python code in between (nothing it calls can run a finalizer or switch
 * threads: the future, the one object that may start a collection, is allocated before the
 * first read),
 * so no other thread sees a half-staged record. A thread that holds stage.lock may be in the
 * middle of a drain: then `locked()` says so and the call goes to `pure`, which waits for
 * the lock. */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;         /* the instance __dict__: __name__, __qualname__, __signature__ */
    PyObject *pure;
    PyObject *stage;
    PyObject *runs;
    PyObject *locked;       /* stage.lock.locked */
    PyTypeObject *run_type;
    PyTypeObject *future_type;
    Py_ssize_t off_values, off_stamps, off_keys, off_deliveries, off_delivery_pos, off_run,
        off_pos;
    long long value_limit, record_cost;
} StagerObject;

static PyObject *str_held, *str_cap, *kw_names[8];
static const char *const KW[8] = {"topic", "value", "key", "headers", "partition",
                                  "timestamp_ms", "on_delivery", "callback"};

static int slot_offset(PyTypeObject *t, const char *name, Py_ssize_t *out) {
    PyObject *descr = PyDict_GetItemString(t->tp_dict, name);
    if (descr == NULL || !PyObject_TypeCheck(descr, &PyMemberDescr_Type) ||
        ((PyMemberDescrObject *)descr)->d_member->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "%s is not an object slot of %s", name, t->tp_name);
        return -1;
    }
    *out = ((PyMemberDescrObject *)descr)->d_member->offset;
    return 0;
}

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

static PyObject *stager_forward(StagerObject *self, PyObject *const *args, size_t nargsf,
                                PyObject *kwnames) {
    return PyObject_Vectorcall(self->pure, args, nargsf, kwnames);
}

static PyObject *stager_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames) {
    StagerObject *self = (StagerObject *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *a[8] = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    if (nargs > 8) return stager_forward(self, args, nargsf, kwnames);
    for (Py_ssize_t i = 0; i < nargs; i++) a[i] = args[i];
    if (kwnames != NULL) {
        Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t j = 0; j < nk; j++) {
            PyObject *name = PyTuple_GET_ITEM(kwnames, j);
            int idx = -1;
            for (int k = 0; k < 8 && idx < 0; k++)
                if (name == kw_names[k]) idx = k;
            for (int k = 0; k < 8 && idx < 0; k++)
                if (PyUnicode_Compare(name, kw_names[k]) == 0) idx = k;
            if (PyErr_Occurred()) PyErr_Clear();
            if (idx < 0 || a[idx] != NULL) return stager_forward(self, args, nargsf, kwnames);
            a[idx] = args[nargs + j];
        }
    }
    PyObject *topic = a[0], *value = a[1], *key = a[2], *on_delivery = a[6];
    if (key == Py_None) key = NULL;
    if (on_delivery == Py_None) on_delivery = NULL;
    for (int k = 3; k < 8; k++)
        if (k != 6 && a[k] != NULL && a[k] != Py_None)
            return stager_forward(self, args, nargsf, kwnames);
    if (topic == NULL || !PyUnicode_CheckExact(topic) || value == NULL ||
        !PyBytes_CheckExact(value) || (key != NULL && !PyBytes_CheckExact(key)))
        return stager_forward(self, args, nargsf, kwnames);
    long long size = PyBytes_GET_SIZE(value) + (key == NULL ? 0 : PyBytes_GET_SIZE(key));
    if (size > self->value_limit) return stager_forward(self, args, nargsf, kwnames);

    /* The allocation that may start a garbage collection (and so run Python code) first. */
    PyObject *future = self->future_type->tp_alloc(self->future_type, 0);
    if (future == NULL) return NULL;
    /* From here to the end: no Python code runs, so no other thread does either. */
    PyObject *locked = PyObject_CallNoArgs(self->locked);
    if (locked == NULL) goto error;
    int busy = locked != Py_False;
    Py_DECREF(locked);
    if (busy) goto forward;
    PyObject *run = PyDict_GetItemWithError(self->runs, topic);  /* borrowed */
    if (run == NULL) {
        if (PyErr_Occurred()) goto error;
        goto forward;  /* the run's first record: opening it is the pure path's */
    }
    if (Py_TYPE(run) != self->run_type) goto forward;
    PyObject *values = SLOT(run, self->off_values), *stamps = SLOT(run, self->off_stamps);
    PyObject *keys = SLOT(run, self->off_keys);
    PyObject *fns = SLOT(run, self->off_deliveries), *fn_pos = SLOT(run, self->off_delivery_pos);
    if (values == NULL || !PyList_CheckExact(values) || stamps == NULL ||
        !PyList_CheckExact(stamps) || keys == NULL || fns == NULL || !PyList_CheckExact(fns) ||
        fn_pos == NULL || !PyList_CheckExact(fn_pos))
        goto forward;
    if (keys == Py_None) {
        if (key != NULL) goto forward;  /* the run's first key: add_key, in the pure path */
    } else if (!PyList_CheckExact(keys)) {
        goto forward;
    }
    PyObject *held_obj = PyObject_GetAttr(self->stage, str_held);
    if (held_obj == NULL) goto error;
    PyObject *cap_obj = PyObject_GetAttr(self->stage, str_cap);
    if (cap_obj == NULL) {
        Py_DECREF(held_obj);
        goto error;
    }
    int o1 = 0, o2 = 0;
    long long held = PyLong_CheckExact(held_obj) ? PyLong_AsLongLongAndOverflow(held_obj, &o1) : 0;
    long long cap = PyLong_CheckExact(cap_obj) ? PyLong_AsLongLongAndOverflow(cap_obj, &o2) : 0;
    int exact = PyLong_CheckExact(held_obj) && PyLong_CheckExact(cap_obj) && !o1 && !o2;
    Py_DECREF(held_obj);
    Py_DECREF(cap_obj);
    if (!exact || held >= cap) goto forward;  /* full or closed: the pure path says None */

    Py_ssize_t pos = PyList_GET_SIZE(values);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);  /* time.time_ns() */
    PyObject *stamp = PyLong_FromLongLong((long long)now.tv_sec * 1000000000LL + now.tv_nsec);
    if (stamp == NULL) goto error;
    int bad = PyList_Append(stamps, stamp);
    Py_DECREF(stamp);
    if (bad) goto error;
    if (keys != Py_None && PyList_Append(keys, key == NULL ? Py_None : key) < 0) goto error;
    if (PyList_Append(values, value) < 0) goto error;
    PyObject *new_held = PyLong_FromLongLong(held + size + self->record_cost);
    if (new_held == NULL) goto error;
    bad = PyObject_SetAttr(self->stage, str_held, new_held);
    Py_DECREF(new_held);
    if (bad) goto error;
    PyObject *pos_obj = PyLong_FromSsize_t(pos);
    if (pos_obj == NULL) goto error;
    SLOT(future, self->off_run) = Py_NewRef(run);
    SLOT(future, self->off_pos) = pos_obj;
    if (on_delivery != NULL &&
        (PyList_Append(fns, on_delivery) < 0 || PyList_Append(fn_pos, pos_obj) < 0))
        goto error;
    return future;
forward:
    Py_DECREF(future);
    return stager_forward(self, args, nargsf, kwnames);
error:
    Py_DECREF(future);
    return NULL;
}

static PyObject *stager_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *pure, *stage, *runs, *locked;
    PyTypeObject *run_type, *future_type;
    long long value_limit, record_cost;
    if (!PyArg_ParseTuple(args, "OOO!OO!O!LL:Stager", &pure, &stage, &PyDict_Type, &runs,
                          &locked, &PyType_Type, &run_type, &PyType_Type, &future_type,
                          &value_limit, &record_cost))
        return NULL;
    if (!PyCallable_Check(pure) || !PyCallable_Check(locked)) {
        PyErr_SetString(PyExc_TypeError, "Stager() needs the pure stager and lock.locked");
        return NULL;
    }
    StagerObject *self = (StagerObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = stager_vectorcall;
    if (slot_offset(run_type, "values", &self->off_values) < 0 ||
        slot_offset(run_type, "timestamps", &self->off_stamps) < 0 ||
        slot_offset(run_type, "keys", &self->off_keys) < 0 ||
        slot_offset(run_type, "deliveries", &self->off_deliveries) < 0 ||
        slot_offset(run_type, "delivery_pos", &self->off_delivery_pos) < 0 ||
        slot_offset(future_type, "_run", &self->off_run) < 0 ||
        slot_offset(future_type, "_pos", &self->off_pos) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->pure = Py_NewRef(pure);
    self->stage = Py_NewRef(stage);
    self->runs = Py_NewRef(runs);
    self->locked = Py_NewRef(locked);
    self->run_type = (PyTypeObject *)Py_NewRef(run_type);
    self->future_type = (PyTypeObject *)Py_NewRef(future_type);
    self->value_limit = value_limit;
    self->record_cost = record_cost;
    return (PyObject *)self;
}

static int stager_traverse(StagerObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->dict);
    Py_VISIT(self->pure);
    Py_VISIT(self->stage);
    Py_VISIT(self->runs);
    Py_VISIT(self->locked);
    Py_VISIT(self->run_type);
    Py_VISIT(self->future_type);
    return 0;
}

static int stager_clear(StagerObject *self) {
    Py_CLEAR(self->dict);
    Py_CLEAR(self->pure);
    Py_CLEAR(self->stage);
    Py_CLEAR(self->runs);
    Py_CLEAR(self->locked);
    Py_CLEAR(self->run_type);
    Py_CLEAR(self->future_type);
    return 0;
}

static void stager_dealloc(StagerObject *self) {
    PyObject_GC_UnTrack(self);
    stager_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *stager_get_pure(StagerObject *self, void *closure) {
    return Py_NewRef(self->pure);
}

static PyGetSetDef stager_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"pure", (getter)stager_get_pure, NULL, "the pure-Python stager calls fall back to", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject StagerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sdk.records._fast.Stager",
    .tp_basicsize = sizeof(StagerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "The compiled per-record send of the producer's stage (sdk.producer.staging).",
    .tp_new = stager_new,
    .tp_dealloc = (destructor)stager_dealloc,
    .tp_traverse = (traverseproc)stager_traverse,
    .tp_clear = (inquiry)stager_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(StagerObject, vectorcall),
    .tp_dictoffset = offsetof(StagerObject, dict),
    .tp_getset = stager_getset,
};

/* ---------------------------------------------------------------- slotted instances */

/* SlotMaker(cls, names)(*values) is cls's instance with the object slots `names` set to
 * `values`, in order, without calling __init__ (a frozen dataclass's __init__ sets each
 * field through object.__setattr__: ~0.7 us for RecordMetadata, the producer's delivery
 * callbacks build one per record). An instance whose values are all atomic (str, int,
 * bytes, float, None) is untracked by the cyclic GC, as CPython does for such tuples. The
 * pure twin writes the same slots through their descriptors (sdk.producer.batch). */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyTypeObject *cls;
    Py_ssize_t n;
    Py_ssize_t off[16];
} SlotMakerObject;

static int atomic(PyObject *v) {
    return v == Py_None || PyLong_CheckExact(v) || PyUnicode_CheckExact(v) ||
           PyBytes_CheckExact(v) || PyFloat_CheckExact(v) || PyBool_Check(v);
}

static PyObject *slotmaker_vectorcall(PyObject *callable, PyObject *const *args,
                                      size_t nargsf, PyObject *kwnames) {
    SlotMakerObject *self = (SlotMakerObject *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != self->n || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_Format(PyExc_TypeError, "%s maker takes %zd positional arguments (%zd given)",
                     self->cls->tp_name, self->n, nargs);
        return NULL;
    }
    PyObject *obj = self->cls->tp_alloc(self->cls, 0);
    if (obj == NULL) return NULL;
    int all_atomic = 1;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        SLOT(obj, self->off[i]) = Py_NewRef(args[i]);
        all_atomic &= atomic(args[i]);
    }
    if (all_atomic && PyObject_IS_GC(obj)) PyObject_GC_UnTrack(obj);
    return obj;
}

static PyObject *slotmaker_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyTypeObject *cls;
    PyObject *names;
    if (!PyArg_ParseTuple(args, "O!O!:SlotMaker", &PyType_Type, &cls, &PyTuple_Type, &names))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    if (n > 16) {
        PyErr_SetString(PyExc_ValueError, "SlotMaker takes at most 16 slots");
        return NULL;
    }
    if (cls->tp_new != PyBaseObject_Type.tp_new || cls->tp_init == NULL) {
        /* a class with its own __new__ may need it: not for this maker */
        PyErr_Format(PyExc_TypeError, "%s has its own __new__", cls->tp_name);
        return NULL;
    }
    SlotMakerObject *self = (SlotMakerObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = slotmaker_vectorcall;
    self->n = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        PyObject *descr = PyUnicode_Check(name) ? PyObject_GetAttr((PyObject *)cls, name) : NULL;
        int ok = descr != NULL && PyObject_TypeCheck(descr, &PyMemberDescr_Type) &&
                 ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX;
        if (ok) self->off[i] = ((PyMemberDescrObject *)descr)->d_member->offset;
        Py_XDECREF(descr);
        PyErr_Clear();
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "%R is not an object slot of %s", name,
                         cls->tp_name);
            Py_DECREF(self);
            return NULL;
        }
    }
    /* every slot must be given: an unset one would read as a missing attribute */
    Py_ssize_t slots = 0;
    for (PyTypeObject *t = cls; t != NULL && t != &PyBaseObject_Type; t = t->tp_base) {
        PyMemberDef *m = t->tp_members;
        for (; m != NULL && m->name != NULL; m++)
            if (m->type == T_OBJECT_EX) slots++;
    }
    if (slots != n) {
        PyErr_Format(PyExc_TypeError, "%s has %zd object slots, %zd named", cls->tp_name,
                     slots, n);
        Py_DECREF(self);
        return NULL;
    }
    self->cls = (PyTypeObject *)Py_NewRef(cls);
    return (PyObject *)self;
}

static void slotmaker_dealloc(SlotMakerObject *self) {
    Py_XDECREF(self->cls);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject SlotMakerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sdk.records._fast.SlotMaker",
    .tp_basicsize = sizeof(SlotMakerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "SlotMaker(cls, names)(*values): cls's instance with its slots set, no __init__.",
    .tp_new = slotmaker_new,
    .tp_dealloc = (destructor)slotmaker_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(SlotMakerObject, vectorcall),
};

/* init(ConsumerRecord, MalformedDataError): read the slot offsets once. */
static PyObject *fast_init(PyObject *self, PyObject *args) {
    PyObject *cls, *exc;
    if (!PyArg_ParseTuple(args, "O!O:init", &PyType_Type, &cls, &exc)) return NULL;
    Py_ssize_t offsets[F_COUNT];
    for (int f = 0; f < F_COUNT; f++) {
        PyObject *descr = PyDict_GetItemString(((PyTypeObject *)cls)->tp_dict, FIELD_NAMES[f]);
        if (descr == NULL || !PyObject_TypeCheck(descr, &PyMemberDescr_Type)) {
            PyErr_Format(PyExc_TypeError, "%s is not a slot of the record class",
                         FIELD_NAMES[f]);
            return NULL;
        }
        PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
        if (m->type != T_OBJECT_EX || (m->flags & READONLY)) {
            PyErr_Format(PyExc_TypeError, "slot %s is not a writable object slot",
                         FIELD_NAMES[f]);
            return NULL;
        }
        offsets[f] = m->offset;
    }
    memcpy(field_offset, offsets, sizeof offsets);
    Py_INCREF(cls);
    Py_INCREF(exc);
    Py_XSETREF(record_base, (PyTypeObject *)cls);
    Py_XSETREF(malformed, exc);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"decode", (PyCFunction)(void (*)(void))fast_decode, METH_FASTCALL,
     "decode(buf, pos, end, count, base_offset, base_ts, topic, partition, ts_type, epoch,"
     " cls) -> list of records (consumer_records._decode, compiled)"},
    {"encode_values", (PyCFunction)(void (*)(void))fast_encode_values, METH_FASTCALL,
     "encode_values(buf, used, values, timestamps, start, stop, room, base, od,"
     " count_before) -> (i, used, od, top) or None (RecordBatchBuilder.append_values)"},
    {"init", fast_init, METH_VARARGS,
     "init(ConsumerRecord, MalformedDataError): bind the record class and error type"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "sdk.records._fast",
    "Compiled per-record work of sdk.records (see sdk.records.fast_path).", -1, methods,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fast(void) {
    str_held = PyUnicode_InternFromString("held");
    str_cap = PyUnicode_InternFromString("cap");
    if (str_held == NULL || str_cap == NULL) return NULL;
    for (int k = 0; k < 8; k++)
        if ((kw_names[k] = PyUnicode_InternFromString(KW[k])) == NULL) return NULL;
    if (PyType_Ready(&StagerType) < 0 || PyType_Ready(&SlotMakerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Stager", (PyObject *)&StagerType) < 0 ||
        PyModule_AddObjectRef(m, "SlotMaker", (PyObject *)&SlotMakerType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
