/*
 * The OTLP receiver's per-span work in C: decoding, grouping spans by trace, pairing Triton's spans for the
 * stage histograms, and adding up the observations of a batch.
 *
 * Why hand-written: at 100,000-200,000 spans/s on one core the whole budget is 5-10 us a span with HTTP, and
 * the same work in Python costs ~12 us (docs/traces.md, "Throughput"). No library does this: upb parses a
 * body in ~0.4 us a span but then builds a Python object for every field touched, and orjson leaves a tree
 * of dicts to walk. This module produces *exactly* the records the Python decoders produce
 * (sidecar/traces/otlp_decode.py; tests/traces/test_traces_native.py compares them on real captures, random
 * bodies and every truncation), and leaves the entry state and histogram counts the Python store and
 * stage code would leave (same tests).
 *
 * The rule that keeps it safe: this code handles the shapes real exporters send and nothing else. Anything
 * unusual (a wire type it does not expect, a span the Python code would reject, a value it cannot
 * represent) makes it return None for the whole body (protobuf) or hand that one span to a Python callback
 * (JSON), and the Python path, the reference, does what it always did. Every read is bounds-checked.
 *
 * Entry points (see sidecar/traces/native.py):
 *   ingest_pb(body, service_fn, plain, kept, limit, bounds)         -> None | (records, items)
 *   ingest_json(doc, slow_span, result, plain, kept, limit, bounds) -> None | (records, items)
 * With plain=None only the records are built (items is None).
 *   items: the batch's traces in order of first appearance, each either a tuple (key, trace_id_hex, by_id,
 *          start, end, error, model, stage_compute, stage_waiting, models) for a trace that is not in the store
 *          (models: the (model, version) pairs it observed, in order of first observation, or None) and
 *          whose spans all take the fast path, or a list of records (arrival order) of one or more
 *          consecutive other traces, for TraceStore's per-span path, or a 1-tuple (obs,): the stage
 *          observations of the new traces since the previous such item, placed before each list and at the
 *          end so that taking the items in order observes in the order the per-span path would; obs is
 *          [(model_version, stage, [(bucket, count)...], sum, [(bucket, trace_id_hex, secs)...])], series in
 *          order of first observation.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Record layout (sidecar/traces/records.py). */
enum { R_TRACE, R_SPAN, R_PARENT, R_NAME, R_START, R_END, R_STATUS, R_MODEL, R_EVENTS, R_SERVICE, R_FMT, R_RAW,
       R_LEN };
#define FMT_JSON 1
#define FMT_PB 2

/* Triton's event names that stage derivation reads (sidecar/traces/stages.py). */
enum {
    EV_HTTP_RECV_START, EV_HTTP_RECV_END, EV_GRPC_WAITREAD_START, EV_GRPC_WAITREAD_END,
    EV_HTTP_SEND_START, EV_HTTP_SEND_END, EV_GRPC_SEND_START, EV_GRPC_SEND_END,
    EV_REQUEST_START, EV_REQUEST_END, EV_QUEUE_START, EV_COMPUTE_START, EV_COMPUTE_INPUT_END,
    EV_COMPUTE_OUTPUT_START, EV_COMPUTE_END, NEV
};
static const char *const EV_NAMES[NEV] = {
    "HTTP_RECV_START", "HTTP_RECV_END", "GRPC_WAITREAD_START", "GRPC_WAITREAD_END",
    "HTTP_SEND_START", "HTTP_SEND_END", "GRPC_SEND_START", "GRPC_SEND_END",
    "REQUEST_START", "REQUEST_END", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END",
    "COMPUTE_OUTPUT_START", "COMPUTE_END",
};
static size_t EV_LENS[NEV];

/* Stage indexes, as STAGES in stages.py. */
enum { ST_NET, ST_QUEUE, ST_C_IN, ST_C_INFER, ST_C_OUT, ST_SEND, ST_REQUEST, NSTAGE };

#define MAX_BUCKETS 64
#define MAX_FAST_GROUP 64 /* spans of one trace in one batch the fast path pairs (quadratic in this) */

static const char MODEL_ATTR[] = "triton.model_name";
static const char VERSION_ATTR[] = "triton.model_version";

/* Interned strings, created once at import and never changed. */
static PyObject *s_ev[NEV];
static PyObject *s_empty, *s_compute, *s_model_attr, *s_version_attr, *s_service_name;
static PyObject *k_resourceSpans, *k_resource, *k_attributes, *k_key, *k_value, *k_stringValue, *k_intValue,
    *k_doubleValue, *k_boolValue, *k_scopeSpans, *k_ils, *k_spans, *k_code, *k_message;
static PyObject *s_status_names[3], *s_kind_names[6];
static PyObject *i_fmt_json, *i_fmt_pb;

/* ------------------------------------------------------------------ per-span and per-trace state */

typedef struct {
    PyObject *rec;        /* borrowed: the records list owns it */
    const uint8_t *tid;   /* inside rec[0]: 16 bytes, or tidn for a record the Python function built */
    Py_ssize_t tidn;
    const uint8_t *sid;   /* 8 bytes, inside rec[1] */
    const uint8_t *pid;   /* 8 bytes inside rec[2], or NULL */
    PyObject *model;      /* borrowed rec[7], NULL when None */
    uint64_t start, end;
    uint64_t ev[NEV];
    uint32_t evmask;
    int fast;             /* times representable and the span fully understood */
    int is_compute;
    int error;
    int next;             /* next span of the same trace, or -1 */
} SpanC;

typedef struct {
    int head, tail, n;
} GroupC;

typedef struct {
    SpanC *spans;
    Py_ssize_t n, cap;
    PyObject *records;    /* list */
} Batch;

static int batch_init(Batch *b) {
    b->n = 0;
    b->cap = 128;
    b->spans = PyMem_Malloc(sizeof(SpanC) * (size_t)b->cap);
    b->records = PyList_New(0);
    if (b->spans == NULL || b->records == NULL) {
        PyMem_Free(b->spans);
        Py_XDECREF(b->records);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void batch_free(Batch *b) {
    PyMem_Free(b->spans);
    Py_XDECREF(b->records);
}

/* A new span slot, zeroed; NULL on memory error. */
static SpanC *batch_add(Batch *b) {
    if (b->n == b->cap) {
        Py_ssize_t cap = b->cap * 2;
        SpanC *s = PyMem_Realloc(b->spans, sizeof(SpanC) * (size_t)cap);
        if (s == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        b->spans = s;
        b->cap = cap;
    }
    SpanC *s = &b->spans[b->n++];
    memset(s, 0, sizeof(*s));
    s->next = -1;
    return s;
}

/* Appends rec (a new reference, stolen) and fills the span's id pointers from it. */
static int batch_take(Batch *b, SpanC *s, PyObject *rec) {
    if (PyList_Append(b->records, rec) < 0) {
        Py_DECREF(rec);
        return -1;
    }
    Py_DECREF(rec);
    s->rec = rec;
    s->tid = (const uint8_t *)PyBytes_AS_STRING(PyTuple_GET_ITEM(rec, R_TRACE));
    s->tidn = 16;
    s->sid = (const uint8_t *)PyBytes_AS_STRING(PyTuple_GET_ITEM(rec, R_SPAN));
    PyObject *p = PyTuple_GET_ITEM(rec, R_PARENT);
    s->pid = p == Py_None ? NULL : (const uint8_t *)PyBytes_AS_STRING(p);
    PyObject *m = PyTuple_GET_ITEM(rec, R_MODEL);
    s->model = m == Py_None ? NULL : m;
    return 0;
}

static int known_event(const char *name, Py_ssize_t n) {
    for (int i = 0; i < NEV; i++)
        if ((size_t)n == EV_LENS[i] && memcmp(name, EV_NAMES[i], (size_t)n) == 0) return i;
    return -1;
}

static void set_event(SpanC *s, int i, uint64_t ns) {
    s->ev[i] = ns;
    s->evmask |= 1u << i;
}

/* ------------------------------------------------------------------ protobuf wire reading */

typedef struct {
    const uint8_t *p, *end;
    int bad; /* set by rd_tag on a malformed tag: loops end as at the end, and callers check this */
} Rd;

/* 1 and the value, or 0 for a malformed or over-long varint (the Python path then decides). */
static inline int rd_varint(Rd *r, uint64_t *out) {
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (r->p >= r->end) return 0;
        uint8_t b = *r->p++;
        if (i == 9 && b > 1) return 0;
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return 1;
        }
    }
    return 0;
}

/* Reads a tag; 0 at the end of the buffer, or on a bad tag with r->bad set. */
static inline int rd_tag(Rd *r, uint32_t *field, int *wt) {
    uint64_t t;
    if (r->p >= r->end) return 0;
    const uint8_t *start = r->p;
    /* upb refuses a tag written in more than 5 bytes, even with zero padding */
    if (!rd_varint(r, &t) || r->p - start > 5 || t > 0xffffffffu || (t >> 3) == 0) {
        r->bad = 1;
        return 0;
    }
    *field = (uint32_t)(t >> 3);
    *wt = (int)(t & 7);
    return 1;
}

/* Skips a field's value; 0 when malformed or a group (groups are left to the Python path). */
static inline int rd_skip(Rd *r, int wt, const uint8_t **ptr, size_t *len) {
    uint64_t v;
    switch (wt) {
    case 0:
        return rd_varint(r, &v);
    case 1:
        if (r->end - r->p < 8) return 0;
        r->p += 8;
        return 1;
    case 2:
        if (!rd_varint(r, &v) || v > (uint64_t)(r->end - r->p)) return 0;
        if (ptr) {
            *ptr = r->p;
            *len = (size_t)v;
        }
        r->p += v;
        return 1;
    case 5:
        if (r->end - r->p < 4) return 0;
        r->p += 4;
        return 1;
    default:
        return 0;
    }
}

static inline uint64_t le64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if PY_BIG_ENDIAN
    v = __builtin_bswap64(v);
#endif
    return v;
}

static int valid_utf8(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] & 0x80) {
            PyObject *u = PyUnicode_DecodeUTF8((const char *)p, (Py_ssize_t)n, "strict");
            if (u == NULL) {
                PyErr_Clear();
                return 0;
            }
            Py_DECREF(u);
            return 1;
        }
    return 1;
}

/* str of UTF-8 bytes, or NULL with no error set when they are not valid UTF-8. */
static PyObject *utf8_or_null(const uint8_t *p, size_t n) {
    PyObject *u = PyUnicode_DecodeUTF8((const char *)p, (Py_ssize_t)n, "strict");
    if (u == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
    return u;
}

/* otlp_decode._short_value: the model attribute's value when written the usual way. *out: new reference
 * or NULL (not that shape; no error set). Returns -1 on a Python error. */
static int short_value(const uint8_t *b, size_t len, size_t k, PyObject **out) {
    *out = NULL;
    if (len < k + 4 || b[k] != 0x12 || b[k + 1] != len - k - 2) return 0;
    uint8_t tag = b[k + 2], n = b[k + 3];
    if (tag == 0x0A && n == len - k - 4) {
        *out = utf8_or_null(b + k + 4, len - k - 4);
        return *out == NULL && PyErr_Occurred() ? -1 : 0;
    }
    if (tag == 0x18 && n < 0x80 && len == k + 4) {
        *out = PyUnicode_FromFormat("%d", (int)n);
        return *out == NULL ? -1 : 0;
    }
    return 0;
}

typedef struct {
    const uint8_t *key;
    size_t len;
    PyObject *str;
} StrCache;

/* A str for bytes seen in the previous span (model names repeat): a new reference, NULL + no error when
 * not UTF-8. */
static PyObject *cached_utf8(StrCache *c, const uint8_t *p, size_t n) {
    if (c->str != NULL && c->len == n && memcmp(c->key, p, n) == 0) {
        Py_INCREF(c->str);
        return c->str;
    }
    PyObject *u = utf8_or_null(p, n);
    if (u != NULL) {
        Py_XSETREF(c->str, u);
        Py_INCREF(u);
        c->key = p;
        c->len = n;
    }
    return u;
}

typedef struct {
    StrCache name, model, version;
    PyObject *mv; /* the last (model, version) tuple, reused when equal */
    const uint8_t *res_ptr;
    size_t res_len;
    PyObject *service;
    PyObject *service_fn;
} PbCtx;

static void pbctx_clear(PbCtx *c) {
    Py_CLEAR(c->name.str);
    Py_CLEAR(c->model.str);
    Py_CLEAR(c->version.str);
    Py_CLEAR(c->mv);
    Py_CLEAR(c->service);
}

#define MAX_PARTS 4096 /* attributes or events of one span the fast path reads; more goes to Python */

/* Decodes one Span. 1: added; 0: leave the whole body to Python; -1: Python error. */
static int pb_span(Batch *b, PbCtx *c, const uint8_t *sp, size_t slen) {
    Rd r = {sp, sp + slen, 0};
    const uint8_t *tid = NULL, *sid = NULL, *pid = NULL, *name = NULL, *st = NULL;
    size_t tidn = 0, sidn = 0, pidn = 0, namen = 0, stn = 0;
    int has_st = 0;
    uint64_t start = 0, end = 0, kind = 0;
    Py_ssize_t nattr = 0, nev = 0;
    uint32_t f;
    int wt;
    while (rd_tag(&r, &f, &wt)) {
        const uint8_t *ptr = NULL;
        size_t len = 0;
        switch (f) {
        case 1: case 2: case 4: case 5: case 9: case 11: case 15:
            if (wt != 2 || !rd_skip(&r, 2, &ptr, &len)) return 0;
            if (f == 1) { tid = ptr; tidn = len; }
            else if (f == 2) { sid = ptr; sidn = len; }
            else if (f == 4) { pid = ptr; pidn = len; }
            else if (f == 5) {
                if (!valid_utf8(ptr, len)) return 0; /* upb checks every copy, not only the last */
                name = ptr;
                namen = len;
            }
            else if (f == 9) nattr++;
            else if (f == 11) nev++;
            else { st = ptr; stn = len; has_st = 1; }
            break;
        case 6:
            if (wt != 0 || !rd_varint(&r, &kind)) return 0;
            break;
        case 7: case 8:
            if (wt != 1 || r.end - r.p < 8) return 0;
            if (f == 7) start = le64(r.p); else end = le64(r.p);
            r.p += 8;
            break;
        default:
            if (!rd_skip(&r, wt, NULL, NULL)) return 0;
        }
    }
    if (r.bad || r.p != r.end) return 0;
    /* What decode_protobuf rejects (partial success) is left to it, with its messages. */
    static const uint8_t zero[16] = {0};
    if (tidn != 16 || memcmp(tid, zero, 16) == 0) return 0;
    if (sidn != 8 || memcmp(sid, zero, 8) == 0) return 0;
    if (pidn != 0 && pidn != 8) return 0;
    if (nattr > MAX_PARTS || nev > MAX_PARTS) return 0;

    /* status: Status.code (3), message (2, must be UTF-8). */
    long code = 0;
    if (has_st && stn) {
        Rd sr = {st, st + stn, 0};
        while (rd_tag(&sr, &f, &wt)) {
            const uint8_t *ptr = NULL;
            size_t len = 0;
            if (f == 3) {
                uint64_t v;
                if (wt != 0 || !rd_varint(&sr, &v) || v > 0x7fffffffu) return 0;
                code = (long)v;
            } else if (f == 2) {
                if (wt != 2 || !rd_skip(&sr, 2, &ptr, &len) || !valid_utf8(ptr, len)) return 0;
            } else if (!rd_skip(&sr, wt, NULL, NULL)) {
                return 0;
            }
        }
        if (sr.bad || sr.p != sr.end) return 0;
    }

    PyObject *rec = NULL, *o = NULL, *attrs = NULL, *events = NULL, *model = NULL, *raw = NULL;
    PyObject *mname = NULL, *mver = NULL;
    SpanC *s = batch_add(b);
    if (s == NULL) return -1;
    int ret = -1;
    rec = PyTuple_New(R_LEN);
    if (rec == NULL) goto fail;
    if (nattr) {
        attrs = PyTuple_New(nattr);
        if (attrs == NULL) goto fail;
    }
    if (nev) {
        events = PyTuple_New(nev);
        if (events == NULL) goto fail;
    }
    /* Second pass over the repeated fields, in order. */
    Py_ssize_t ia = 0, ie = 0;
    r.p = sp;
    while (rd_tag(&r, &f, &wt)) {
        const uint8_t *ptr = NULL;
        size_t len = 0;
        if (!rd_skip(&r, wt, &ptr, &len)) { ret = 0; goto fail; }
        if (f == 9 && wt == 2) {
            o = PyBytes_FromStringAndSize((const char *)ptr, (Py_ssize_t)len);
            if (o == NULL) goto fail;
            PyTuple_SET_ITEM(attrs, ia++, o);
            /* otlp_decode._model_pb, the shapes it reads by hand; anything else goes to Python. */
            size_t mk = sizeof(MODEL_ATTR) - 1, vk = sizeof(VERSION_ATTR) - 1;
            if (len >= mk + 2 && ptr[0] == 0x0a && ptr[1] == mk && memcmp(ptr + 2, MODEL_ATTR, mk) == 0) {
                if (len < mk + 2 + 4 || ptr[mk + 2] != 0x12 || ptr[mk + 4] != 0x0A ||
                    ptr[mk + 3] != len - mk - 4 || ptr[mk + 5] != len - mk - 6) {
                    ret = 0;
                    goto fail;
                }
                PyObject *v = cached_utf8(&c->model, ptr + mk + 6, len - mk - 6);
                if (v == NULL) { ret = PyErr_Occurred() ? -1 : 0; goto fail; }
                Py_XSETREF(mname, v);
            } else if (len >= vk + 2 && ptr[0] == 0x0a && ptr[1] == vk &&
                       memcmp(ptr + 2, VERSION_ATTR, vk) == 0) {
                PyObject *v;
                if (short_value(ptr, len, vk + 2, &v) < 0) goto fail;
                if (v == NULL) { ret = 0; goto fail; }
                Py_XSETREF(mver, v);
            } else if (!(len >= 1 && ptr[0] == 0x0a)) {
                ret = 0;
                goto fail;
            }
        } else if (f == 11 && wt == 2) {
            o = PyBytes_FromStringAndSize((const char *)ptr, (Py_ssize_t)len);
            if (o == NULL) goto fail;
            PyTuple_SET_ITEM(events, ie++, o);
            /* records._pb_event_times' fast layout: 0x09 <fixed64 time> 0x12 <len> <name>. */
            if (len <= 10 || ptr[0] != 0x09 || ptr[9] != 0x12 || ptr[10] >= 128) { ret = 0; goto fail; }
            size_t nn = ptr[10];
            if (nn > len - 11) nn = len - 11; /* Python slices silently */
            if (!valid_utf8(ptr + 11, nn)) { ret = 0; goto fail; }
            int k = known_event((const char *)ptr + 11, (Py_ssize_t)nn);
            if (k >= 0) set_event(s, k, le64(ptr + 1));
        }
    }
    /* model tuple: (name, version or "") when the model attribute was there. */
    if (mname != NULL) {
        PyObject *ver = mver != NULL ? mver : s_empty;
        if (c->mv != NULL && PyUnicode_Compare(PyTuple_GET_ITEM(c->mv, 0), mname) == 0 &&
            PyUnicode_Compare(PyTuple_GET_ITEM(c->mv, 1), ver) == 0) {
            model = c->mv;
            Py_INCREF(model);
        } else {
            if (PyErr_Occurred()) goto fail;
            model = PyTuple_Pack(2, mname, ver);
            if (model == NULL) goto fail;
            Py_INCREF(model);
            Py_XSETREF(c->mv, model);
        }
    }
    /* raw: (attributes or None, status bytes, kind) */
    PyObject *stb = has_st ? PyBytes_FromStringAndSize((const char *)st, (Py_ssize_t)stn)
                           : PyBytes_FromStringAndSize(NULL, 0);
    if (stb == NULL) goto fail;
    PyObject *kindo = PyLong_FromLong((long)(int32_t)(uint32_t)kind);
    if (kindo == NULL) { Py_DECREF(stb); goto fail; }
    raw = PyTuple_New(3);
    if (raw == NULL) { Py_DECREF(stb); Py_DECREF(kindo); goto fail; }
    if (attrs == NULL) { attrs = Py_None; Py_INCREF(attrs); }
    PyTuple_SET_ITEM(raw, 0, attrs);
    attrs = NULL;
    PyTuple_SET_ITEM(raw, 1, stb);
    PyTuple_SET_ITEM(raw, 2, kindo);

    PyObject *nameo = namen ? cached_utf8(&c->name, name, namen) : (Py_INCREF(s_empty), s_empty);
    if (nameo == NULL) { ret = PyErr_Occurred() ? -1 : 0; goto fail; }
    PyTuple_SET_ITEM(rec, R_NAME, nameo);
    /* Spans of one trace share its id object (the previous span's, usually). */
    PyObject *tido = NULL;
    if (b->n >= 2) {
        PyObject *prev = PyTuple_GET_ITEM(b->spans[b->n - 2].rec, R_TRACE);
        if (memcmp(PyBytes_AS_STRING(prev), tid, 16) == 0) {
            tido = prev;
            Py_INCREF(tido);
        }
    }
    if (tido == NULL && (tido = PyBytes_FromStringAndSize((const char *)tid, 16)) == NULL) goto fail;
    PyTuple_SET_ITEM(rec, R_TRACE, tido);
    if ((o = PyBytes_FromStringAndSize((const char *)sid, 8)) == NULL) goto fail;
    PyTuple_SET_ITEM(rec, R_SPAN, o);
    if (pidn) {
        if ((o = PyBytes_FromStringAndSize((const char *)pid, 8)) == NULL) goto fail;
    } else {
        o = Py_None;
        Py_INCREF(o);
    }
    PyTuple_SET_ITEM(rec, R_PARENT, o);
    if ((o = PyLong_FromUnsignedLongLong(start)) == NULL) goto fail;
    PyTuple_SET_ITEM(rec, R_START, o);
    if ((o = PyLong_FromUnsignedLongLong(end)) == NULL) goto fail;
    PyTuple_SET_ITEM(rec, R_END, o);
    if ((o = PyLong_FromLong(code)) == NULL) goto fail;
    PyTuple_SET_ITEM(rec, R_STATUS, o);
    if (model == NULL) { model = Py_None; Py_INCREF(model); }
    PyTuple_SET_ITEM(rec, R_MODEL, model);
    model = NULL;
    if (events == NULL) { events = Py_None; Py_INCREF(events); }
    PyTuple_SET_ITEM(rec, R_EVENTS, events);
    events = NULL;
    Py_INCREF(c->service);
    PyTuple_SET_ITEM(rec, R_SERVICE, c->service);
    Py_INCREF(i_fmt_pb);
    PyTuple_SET_ITEM(rec, R_FMT, i_fmt_pb);
    PyTuple_SET_ITEM(rec, R_RAW, raw);
    raw = NULL;
    Py_XDECREF(mname);
    Py_XDECREF(mver);
    s->start = start;
    s->end = end;
    s->fast = 1;
    s->error = code == 2;
    s->is_compute = 0; /* set after batch_take, which reads the model */
    if (batch_take(b, s, rec) < 0) return -1;
    s->is_compute = s->model == NULL && s->pid != NULL && namen == 7 && memcmp(name, "compute", 7) == 0;
    return 1;
fail:
    if (ret == 0 && PyErr_Occurred()) ret = -1; /* a failed allocation is an error, not a shape */
    b->n--; /* the slot was not taken */
    Py_XDECREF(rec);
    Py_XDECREF(attrs);
    Py_XDECREF(events);
    Py_XDECREF(model);
    Py_XDECREF(raw);
    Py_XDECREF(mname);
    Py_XDECREF(mver);
    return ret;
}

/* The service name of a resource, through the Python function (otlp_decode._service_pb) that the Python
 * path uses, once per distinct resource. 1, 0 (Python path), -1 error. */
static int pb_service(PbCtx *c, const uint8_t *res, size_t n) {
    if (c->service != NULL && c->res_len == n && (n == 0 || memcmp(c->res_ptr, res, n) == 0)) return 1;
    PyObject *s;
    if (n == 0) {
        s = s_empty;
        Py_INCREF(s);
    } else {
        PyObject *raw = PyBytes_FromStringAndSize((const char *)res, (Py_ssize_t)n);
        if (raw == NULL) return -1;
        s = PyObject_CallOneArg(c->service_fn, raw);
        Py_DECREF(raw);
        if (s == NULL) {
            /* DecodeError and the like: the Python path answers 400 with its own message. */
            PyErr_Clear();
            return 0;
        }
        if (!PyUnicode_Check(s)) {
            Py_DECREF(s);
            return 0;
        }
    }
    Py_XSETREF(c->service, s);
    c->res_ptr = res;
    c->res_len = n;
    return 1;
}

/* 1 decoded, 0 leave it to Python, -1 error. */
static int pb_decode(Batch *b, PyObject *service_fn, const uint8_t *body, size_t n) {
    PbCtx c;
    memset(&c, 0, sizeof(c));
    c.service_fn = service_fn;
    Rd r = {body, body + n, 0};
    uint32_t f;
    int wt, ret = 1;
    while (ret == 1 && rd_tag(&r, &f, &wt)) {
        const uint8_t *rs = NULL;
        size_t rsn = 0;
        if (f == 1) {
            if (wt != 2 || !rd_skip(&r, 2, &rs, &rsn)) { ret = 0; break; }
        } else {
            if (!rd_skip(&r, wt, NULL, NULL)) ret = 0;
            continue;
        }
        /* ResourceSpans: the resource (last wins, wherever it is), then the scope spans in order. */
        const uint8_t *res = NULL;
        size_t resn = 0;
        Rd q = {rs, rs + rsn, 0};
        while (rd_tag(&q, &f, &wt)) {
            const uint8_t *ptr = NULL;
            size_t len = 0;
            if ((f == 1 || f == 2) && wt != 2) { ret = 0; break; }
            if (!rd_skip(&q, wt, &ptr, &len)) { ret = 0; break; }
            if (f == 1) { res = ptr; resn = len; }
        }
        if (ret != 1 || q.bad || q.p != q.end) { ret = 0; break; }
        ret = pb_service(&c, res ? res : body, res ? resn : 0);
        if (ret != 1) break;
        q.p = rs;
        while (ret == 1 && rd_tag(&q, &f, &wt)) {
            const uint8_t *ss = NULL;
            size_t ssn = 0;
            rd_skip(&q, wt, &ss, &ssn);
            if (f != 2) continue;
            Rd z = {ss, ss + ssn, 0};
            while (ret == 1 && rd_tag(&z, &f, &wt)) {
                const uint8_t *sp = NULL;
                size_t spn = 0;
                if (f == 2 && wt != 2) { ret = 0; break; }
                if (!rd_skip(&z, wt, &sp, &spn)) { ret = 0; break; }
                if (f == 2) ret = pb_span(b, &c, sp, spn);
            }
            if (ret == 1 && (z.bad || z.p != z.end)) ret = 0;
        }
    }
    if (ret == 1 && (r.bad || r.p != r.end)) ret = 0;
    pbctx_clear(&c);
    return ret;
}

/* ------------------------------------------------------------------ JSON (a tree orjson built) */

/* Hex digit values; 16 marks a character that is not one. Filled at import. */
static uint8_t HEXVAL[256];

/* 16/32 hex digits -> bytes, or NULL (no error) when not exactly that. */
static PyObject *hex_bytes(PyObject *s, Py_ssize_t digits) {
    if (!PyUnicode_CheckExact(s) || PyUnicode_GET_LENGTH(s) != digits || !PyUnicode_IS_ASCII(s)) return NULL;
    const uint8_t *p = PyUnicode_1BYTE_DATA(s);
    uint8_t out[16];
    int nonzero = 0, bad = 0;
    for (Py_ssize_t i = 0; i < digits / 2; i++) {
        int hi = HEXVAL[p[2 * i]], lo = HEXVAL[p[2 * i + 1]];
        bad |= (hi | lo) & 16;
        out[i] = (uint8_t)((hi << 4) | (lo & 15));
        nonzero |= out[i];
    }
    if (bad) return NULL;
    if (!nonzero) return NULL;
    return PyBytes_FromStringAndSize((const char *)out, digits / 2);
}

/* d.get(k), borrowed; NULL when missing. */
static inline PyObject *dget(PyObject *d, PyObject *k) {
    return PyDict_GetItemWithError(d, k);
}

static int falsy(PyObject *o) {
    return o == NULL || o == Py_None || (PyList_CheckExact(o) && PyList_GET_SIZE(o) == 0) ||
           (PyDict_CheckExact(o) && PyDict_GET_SIZE(o) == 0) ||
           (PyUnicode_CheckExact(o) && PyUnicode_GET_LENGTH(o) == 0) || o == Py_False;
}

/* int(x) as Python computes it, sped up for the common case: a str of 1-19 ASCII digits. New reference; NULL
 * with an error set when int() raises. *u and *ok: the value as uint64 when it fits. */
static PyObject *to_int_u64(PyObject *x, uint64_t *u, int *ok) {
    *ok = 0;
    if (PyUnicode_CheckExact(x) && PyUnicode_IS_ASCII(x)) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(x);
        const uint8_t *p = PyUnicode_1BYTE_DATA(x);
        if (n >= 1 && n <= 19) {
            uint64_t v = 0;
            Py_ssize_t i = 0;
            for (; i < n && p[i] >= '0' && p[i] <= '9'; i++) v = v * 10 + (uint64_t)(p[i] - '0');
            if (i == n) {
                *u = v;
                *ok = 1;
                return PyLong_FromUnsignedLongLong(v);
            }
        }
    }
    PyObject *r = PyLong_CheckExact(x) ? (Py_INCREF(x), x) : PyNumber_Long(x);
    if (r != NULL) {
        unsigned long long v = PyLong_AsUnsignedLongLong(r);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) PyErr_Clear();
        else {
            *u = v;
            *ok = 1;
        }
    }
    return r;
}

static PyObject *to_int(PyObject *x) {
    uint64_t u;
    int ok;
    return to_int_u64(x, &u, &ok);
}

/* Which OTLP JSON key a dict key is (orjson's key objects are not ours, so a lookup per key would compare
 * strings anyway; one pass over the items is cheaper). */
enum { K_OTHER, K_TRACE, K_SPAN, K_PARENT, K_NAME, K_KIND, K_START, K_END, K_ATTRS, K_EVENTS, K_STATUS, K_TIME };

static int key_id(PyObject *k) {
    if (!PyUnicode_CheckExact(k) || !PyUnicode_IS_ASCII(k)) return K_OTHER;
    const char *p = (const char *)PyUnicode_1BYTE_DATA(k);
#define IS(lit) (memcmp(p, lit, sizeof(lit) - 1) == 0)
    switch (PyUnicode_GET_LENGTH(k)) {
    case 4: return IS("name") ? K_NAME : IS("kind") ? K_KIND : K_OTHER;
    case 6: return IS("spanId") ? K_SPAN : IS("status") ? K_STATUS : IS("events") ? K_EVENTS : K_OTHER;
    case 7: return IS("traceId") ? K_TRACE : K_OTHER;
    case 10: return IS("attributes") ? K_ATTRS : K_OTHER;
    case 12: return IS("parentSpanId") ? K_PARENT : IS("timeUnixNano") ? K_TIME : K_OTHER;
    case 15: return IS("endTimeUnixNano") ? K_END : K_OTHER;
    case 17: return IS("startTimeUnixNano") ? K_START : K_OTHER;
    default: return K_OTHER;
    }
#undef IS
}

/* records.any_json for the shapes it reads without surprises: a new reference, or NULL with no error set
 * when the span should go to Python. */
static PyObject *any_json(PyObject *v) {
    if (falsy(v)) Py_RETURN_NONE; /* `kv.get("value") or {}` then no key matches */
    if (!PyDict_CheckExact(v)) return NULL;
    PyObject *x;
    if ((x = dget(v, k_stringValue)) != NULL) {
        Py_INCREF(x);
        return x;
    }
    PyObject *r = NULL;
    if ((x = dget(v, k_intValue)) != NULL) r = to_int(x);
    else if ((x = dget(v, k_doubleValue)) != NULL) r = PyNumber_Float(x);
    else if ((x = dget(v, k_boolValue)) != NULL) {
        int t = PyObject_IsTrue(x);
        if (t < 0) { PyErr_Clear(); return NULL; }
        r = t ? Py_True : Py_False;
        Py_INCREF(r);
    } else {
        if (PyErr_Occurred()) { PyErr_Clear(); return NULL; }
        if (PyDict_GET_SIZE(v) == 0) Py_RETURN_NONE;
        /* arrayValue, kvlistValue, bytesValue or unknown keys: Python decides */
        PyObject *k;
        Py_ssize_t pos = 0;
        while (PyDict_Next(v, &pos, &k, NULL)) {
            if (PyUnicode_CompareWithASCIIString(k, "arrayValue") == 0 ||
                PyUnicode_CompareWithASCIIString(k, "kvlistValue") == 0 ||
                PyUnicode_CompareWithASCIIString(k, "bytesValue") == 0)
                return NULL;
        }
        Py_RETURN_NONE;
    }
    if (r == NULL) PyErr_Clear();
    return r;
}

/* An enum given as a number or one of `names` (otlp_decode.enum_value); NULL (no error) for Python. */
static PyObject *json_enum(PyObject *v, PyObject **names, int n) {
    if (v == NULL || v == Py_None) return PyLong_FromLong(0);
    if (PyLong_CheckExact(v)) {
        Py_INCREF(v);
        return v;
    }
    if (PyUnicode_CheckExact(v)) {
        for (int i = 0; i < n; i++)
            if (PyUnicode_Compare(v, names[i]) == 0) return PyLong_FromLong(i);
        if (PyErr_Occurred()) PyErr_Clear();
    }
    return NULL;
}

/* One span of the fast shape; 1 added, 0 not that shape (nothing kept, no error), -1 error. */
static int json_span(Batch *b, PyObject *sp, PyObject *service) {
    if (!PyDict_CheckExact(sp)) return 0;
    PyObject *rec = NULL, *tid = NULL, *sid = NULL, *pid = NULL, *attrs = NULL, *model = NULL,
             *events = NULL, *raw = NULL, *name = NULL, *start = NULL, *end = NULL, *code = NULL,
             *msg = NULL, *kind = NULL;
    PyObject *x;
    int ret = 0;
    SpanC *s = batch_add(b);
    if (s == NULL) return -1;
    s->fast = 1;
    PyObject *f[K_TIME + 1] = {NULL};
    {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(sp, &pos, &k, &v)) f[key_id(k)] = v;
    }
    if ((x = f[K_TRACE]) == NULL || (tid = hex_bytes(x, 32)) == NULL) goto out;
    if ((x = f[K_SPAN]) == NULL || (sid = hex_bytes(x, 16)) == NULL) goto out;
    x = f[K_PARENT];
    if (falsy(x)) {
        pid = Py_None;
        Py_INCREF(pid);
    } else if (!PyUnicode_CheckExact(x) || PyUnicode_GET_LENGTH(x) != 16 || (pid = hex_bytes(x, 16)) == NULL) {
        /* all-zero parent ids are fine in Python: let it handle them and the malformed ones */
        goto out;
    }
    /* attributes */
    x = f[K_ATTRS];
    PyObject *mname = NULL, *mver = NULL; /* borrowed from attrs */
    if (!falsy(x)) {
        if (!PyList_CheckExact(x)) goto out;
        Py_ssize_t n = PyList_GET_SIZE(x);
        if ((attrs = PyTuple_New(n)) == NULL) { ret = -1; goto out; }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *kv = PyList_GET_ITEM(x, i), *k, *v;
            if (!PyDict_CheckExact(kv) || (k = dget(kv, k_key)) == NULL || !PyUnicode_CheckExact(k)) goto out;
            if ((v = any_json(dget(kv, k_value))) == NULL) goto out;
            PyObject *pair = PyTuple_Pack(2, k, v);
            Py_DECREF(v);
            if (pair == NULL) { ret = -1; goto out; }
            PyTuple_SET_ITEM(attrs, i, pair);
            if (PyUnicode_Compare(k, s_model_attr) == 0) mname = PyTuple_GET_ITEM(pair, 1);
            else if (PyUnicode_Compare(k, s_version_attr) == 0) mver = PyTuple_GET_ITEM(pair, 1);
        }
        if (PyErr_Occurred()) { ret = -1; goto out; }
        if (mname != NULL && mname != Py_None) {
            PyObject *a = PyObject_Str(mname);
            PyObject *c = mver == NULL || mver == Py_None ? (Py_INCREF(s_empty), s_empty) : PyObject_Str(mver);
            if (a == NULL || c == NULL) {
                Py_XDECREF(a);
                Py_XDECREF(c);
                PyErr_Clear();
                goto out;
            }
            model = PyTuple_Pack(2, a, c);
            Py_DECREF(a);
            Py_DECREF(c);
            if (model == NULL) { ret = -1; goto out; }
        }
    }
    /* events: name -> ns when no event has attributes and no name repeats, else Python */
    x = f[K_EVENTS];
    if (falsy(x)) {
        events = PyTuple_New(0);
    } else {
        if (!PyList_CheckExact(x)) goto out;
        if ((events = PyDict_New()) == NULL) { ret = -1; goto out; }
        Py_ssize_t n = PyList_GET_SIZE(x);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *e = PyList_GET_ITEM(x, i), *en = NULL, *et = NULL, *k, *v;
            if (!PyDict_CheckExact(e)) goto out;
            Py_ssize_t pos = 0;
            int attrs_key = 0;
            while (PyDict_Next(e, &pos, &k, &v)) {
                int id = key_id(k);
                if (id == K_NAME) en = v;
                else if (id == K_TIME) et = v;
                else if (id == K_ATTRS) attrs_key = 1;
            }
            if (attrs_key || en == NULL || !PyUnicode_CheckExact(en) || et == NULL) goto out;
            uint64_t ns;
            int ok;
            PyObject *t = to_int_u64(et, &ns, &ok);
            if (t == NULL) { PyErr_Clear(); goto out; }
            int kn = PyUnicode_IS_ASCII(en)
                         ? known_event((const char *)PyUnicode_1BYTE_DATA(en), PyUnicode_GET_LENGTH(en))
                         : -1;
            /* Triton's names as our interned copies: equal strings, a cached hash, one object for every span */
            int rc = PyDict_SetItem(events, kn >= 0 ? s_ev[kn] : en, t);
            Py_DECREF(t);
            if (rc < 0) { ret = -1; goto out; }
            if (kn >= 0) {
                if (ok) set_event(s, kn, ns);
                else s->fast = 0;
            }
        }
        if (PyDict_GET_SIZE(events) != n) goto out; /* a repeated name: the tuple form */
    }
    if (events == NULL) { ret = -1; goto out; }
    /* name, times */
    x = f[K_NAME];
    name = x == NULL ? (Py_INCREF(s_empty), s_empty) : PyObject_Str(x);
    if (name == NULL) { PyErr_Clear(); goto out; }
    {
        int ok1, ok2;
        if ((x = f[K_START]) == NULL || (start = to_int_u64(x, &s->start, &ok1)) == NULL) { PyErr_Clear(); goto out; }
        if ((x = f[K_END]) == NULL || (end = to_int_u64(x, &s->end, &ok2)) == NULL) { PyErr_Clear(); goto out; }
        if (!ok1 || !ok2) s->fast = 0;
    }
    /* status and kind */
    x = f[K_STATUS];
    if (falsy(x)) {
        code = PyLong_FromLong(0);
        msg = s_empty;
        Py_INCREF(msg);
    } else {
        if (!PyDict_CheckExact(x)) goto out;
        if ((code = json_enum(dget(x, k_code), s_status_names, 3)) == NULL) goto out;
        PyObject *m = dget(x, k_message);
        msg = m == NULL ? (Py_INCREF(s_empty), s_empty) : PyObject_Str(m);
        if (msg == NULL) { PyErr_Clear(); goto out; }
    }
    if (code == NULL) { ret = -1; goto out; }
    if ((kind = json_enum(f[K_KIND], s_kind_names, 6)) == NULL) goto out;
    if (PyErr_Occurred()) { ret = -1; goto out; }
    {
        long cv = PyLong_AsLong(code);
        if (cv == -1 && PyErr_Occurred()) PyErr_Clear();
        s->error = cv == 2;
    }
    raw = PyTuple_Pack(3, attrs ? attrs : Py_None, msg, kind);
    rec = PyTuple_New(R_LEN);
    if (raw == NULL || rec == NULL) { ret = -1; goto out; }
#define SET(i, o) do { PyTuple_SET_ITEM(rec, i, o); o = NULL; } while (0)
    SET(R_TRACE, tid);
    SET(R_SPAN, sid);
    SET(R_PARENT, pid);
    SET(R_NAME, name);
    SET(R_START, start);
    SET(R_END, end);
    SET(R_STATUS, code);
    if (model == NULL) { model = Py_None; Py_INCREF(model); }
    SET(R_MODEL, model);
    SET(R_EVENTS, events);
    Py_INCREF(service);
    PyTuple_SET_ITEM(rec, R_SERVICE, service);
    Py_INCREF(i_fmt_json);
    PyTuple_SET_ITEM(rec, R_FMT, i_fmt_json);
    SET(R_RAW, raw);
#undef SET
    {
        PyObject *nm = PyTuple_GET_ITEM(rec, R_NAME);
        PyObject *r2 = rec;
        rec = NULL;
        if (batch_take(b, s, r2) < 0) { ret = -1; goto out_taken; }
        s->is_compute = s->model == NULL && s->pid != NULL && PyUnicode_Compare(nm, s_compute) == 0;
        if (PyErr_Occurred()) { ret = -1; goto out_taken; }
    }
    ret = 1;
    goto out_taken;
out:
    if (ret == 0 && PyErr_Occurred()) ret = -1; /* a failed allocation is an error, not a shape */
    b->n--;
out_taken:
    Py_XDECREF(rec);
    Py_XDECREF(tid);
    Py_XDECREF(sid);
    Py_XDECREF(pid);
    Py_XDECREF(attrs);
    Py_XDECREF(model);
    Py_XDECREF(events);
    Py_XDECREF(raw);
    Py_XDECREF(name);
    Py_XDECREF(start);
    Py_XDECREF(end);
    Py_XDECREF(code);
    Py_XDECREF(msg);
    Py_XDECREF(kind);
    return ret;
}

/* A span the fast path does not take: the Python function decides (it rejects into `result` or returns a
 * record). The record is kept with fast = 0, so its whole trace takes the Python store path; it is grouped
 * with its trace whenever its trace id is 16 bytes (bytes.fromhex of spaced hex can give other lengths). */
static int json_slow(Batch *b, PyObject *slow, PyObject *sp, PyObject *service, PyObject *result) {
    PyObject *rec = PyObject_CallFunctionObjArgs(slow, sp, service, result, NULL);
    if (rec == NULL) return -1;
    if (rec == Py_None) {
        Py_DECREF(rec);
        return 0;
    }
    SpanC *s = batch_add(b);
    if (s == NULL || PyList_Append(b->records, rec) < 0) {
        if (s != NULL) b->n--;
        Py_DECREF(rec);
        return -1;
    }
    Py_DECREF(rec); /* the list holds it */
    s->rec = rec;
    s->fast = 0;
    if (PyTuple_CheckExact(rec) && PyTuple_GET_SIZE(rec) == R_LEN) {
        PyObject *t = PyTuple_GET_ITEM(rec, R_TRACE);
        if (PyBytes_CheckExact(t)) {
            /* any length: bytes.fromhex of spaced hex gives shorter ids, and the store groups by the bytes */
            s->tid = (const uint8_t *)PyBytes_AS_STRING(t);
            s->tidn = PyBytes_GET_SIZE(t);
        }
    }
    return 1;
}

/* 1 decoded, 0 leave it to Python, -1 error. */
static int json_decode(Batch *b, PyObject *doc, PyObject *slow, PyObject *result) {
    if (!PyDict_CheckExact(doc)) return 0;
    PyObject *rsl = dget(doc, k_resourceSpans);
    if (falsy(rsl)) return PyErr_Occurred() ? -1 : 1;
    if (!PyList_CheckExact(rsl)) return 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(rsl); i++) {
        PyObject *rs = PyList_GET_ITEM(rsl, i), *x;
        if (!PyDict_CheckExact(rs)) return 0;
        PyObject *service = s_empty; /* borrowed until replaced by an owned str */
        Py_INCREF(service);
        x = dget(rs, k_resource);
        if (!falsy(x)) {
            if (!PyDict_CheckExact(x)) goto bail;
            PyObject *al = dget(x, k_attributes);
            if (!falsy(al)) {
                if (!PyList_CheckExact(al)) goto bail;
                for (Py_ssize_t j = 0; j < PyList_GET_SIZE(al); j++) {
                    PyObject *kv = PyList_GET_ITEM(al, j);
                    if (!PyDict_CheckExact(kv)) goto bail;
                    PyObject *k = dget(kv, k_key);
                    if (k == NULL || !PyUnicode_CheckExact(k) || PyUnicode_Compare(k, s_service_name) != 0) continue;
                    PyObject *v = dget(kv, k_value);
                    PyObject *sv;
                    if (falsy(v)) sv = s_empty;
                    else if (!PyDict_CheckExact(v)) goto bail;
                    else if ((sv = dget(v, k_stringValue)) == NULL) sv = s_empty;
                    PyObject *str = PyObject_Str(sv);
                    if (str == NULL) { Py_DECREF(service); return -1; }
                    Py_SETREF(service, str);
                }
            }
        }
        x = dget(rs, k_scopeSpans);
        if (falsy(x)) x = dget(rs, k_ils);
        if (!falsy(x)) {
            if (!PyList_CheckExact(x)) goto bail;
            for (Py_ssize_t j = 0; j < PyList_GET_SIZE(x); j++) {
                PyObject *ss = PyList_GET_ITEM(x, j);
                if (!PyDict_CheckExact(ss)) goto bail;
                PyObject *spans = dget(ss, k_spans);
                if (falsy(spans)) continue;
                if (!PyList_CheckExact(spans)) goto bail;
                for (Py_ssize_t k = 0; k < PyList_GET_SIZE(spans); k++) {
                    PyObject *sp = PyList_GET_ITEM(spans, k);
                    int rc = json_span(b, sp, service);
                    if (rc == 0) rc = json_slow(b, slow, sp, service, result);
                    if (rc < 0) { Py_DECREF(service); return -1; }
                }
            }
        }
        Py_DECREF(service);
        if (PyErr_Occurred()) return -1;
        continue;
    bail:
        Py_DECREF(service);
        return PyErr_Occurred() ? -1 : 0;
    }
    return 1;
}

/* ------------------------------------------------------------------ grouping, pairing, observations */

typedef struct {
    PyObject *mv; /* borrowed (a record's model tuple) */
    int64_t counts[NSTAGE][MAX_BUCKETS + 1];
    double sum[NSTAGE];
    PyObject *ex_tid[NSTAGE][MAX_BUCKETS + 1]; /* borrowed from `hexes` */
    double ex_secs[NSTAGE][MAX_BUCKETS + 1];
    int present[NSTAGE];
    int group; /* the last trace (1-based) that observed this model, for Emit.models */
} Agg;

typedef struct {
    const double *bounds;
    int nb;
    Agg *aggs;
    int naggs, capaggs;
    PyObject *index; /* mv -> agg slot */
    PyObject *hexes; /* list owning the trace-id strings the exemplars point at */
    int (*ord)[2];   /* (slot, stage) in order of first observation since the last flush */
    int nord, capord;
} Obs;

/* Appends the sums since the last flush to items as a 1-tuple (obs,), series in order of first observation
 * (the order StageHistograms creates them in), and starts over. */
static int obs_flush(Obs *o, PyObject *items) {
    if (o->nord == 0) return 0;
    PyObject *obs = PyList_New(0);
    if (obs == NULL) return -1;
    for (int k = 0; k < o->nord; k++) {
        Agg *a = &o->aggs[o->ord[k][0]];
        int st = o->ord[k][1];
        PyObject *counts = PyList_New(0), *ex = PyList_New(0), *item = NULL;
        int bad = counts == NULL || ex == NULL;
        for (int j = 0; !bad && j <= o->nb; j++) {
            if (!a->counts[st][j]) continue;
            PyObject *c = Py_BuildValue("(iL)", j, (long long)a->counts[st][j]);
            PyObject *x = Py_BuildValue("(iOd)", j, a->ex_tid[st][j], a->ex_secs[st][j]);
            bad = c == NULL || x == NULL || PyList_Append(counts, c) < 0 || PyList_Append(ex, x) < 0;
            Py_XDECREF(c);
            Py_XDECREF(x);
        }
        if (!bad) {
            item = Py_BuildValue("(OiOdO)", a->mv, st, counts, a->sum[st], ex);
            bad = item == NULL || PyList_Append(obs, item) < 0;
        }
        Py_XDECREF(item);
        Py_XDECREF(counts);
        Py_XDECREF(ex);
        if (bad) {
            Py_DECREF(obs);
            return -1;
        }
        memset(a->counts[st], 0, sizeof(a->counts[st]));
        memset(a->ex_tid[st], 0, sizeof(a->ex_tid[st]));
        a->sum[st] = 0.0;
        a->present[st] = 0;
    }
    o->nord = 0;
    PyObject *chunk = PyTuple_Pack(1, obs);
    Py_DECREF(obs);
    if (chunk == NULL) return -1;
    int rc = PyList_Append(items, chunk);
    Py_DECREF(chunk);
    return rc;
}

static Agg *obs_slot(Obs *o, PyObject *mv) {
    PyObject *i = PyDict_GetItemWithError(o->index, mv);
    if (i != NULL) return &o->aggs[PyLong_AsLong(i)];
    if (PyErr_Occurred()) return NULL;
    if (o->naggs == o->capaggs) {
        int cap = o->capaggs ? o->capaggs * 2 : 4;
        Agg *a = PyMem_Realloc(o->aggs, sizeof(Agg) * (size_t)cap);
        if (a == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        o->aggs = a;
        o->capaggs = cap;
    }
    PyObject *n = PyLong_FromLong(o->naggs);
    if (n == NULL || PyDict_SetItem(o->index, mv, n) < 0) {
        Py_XDECREF(n);
        return NULL;
    }
    Py_DECREF(n);
    Agg *a = &o->aggs[o->naggs++];
    memset(a, 0, sizeof(*a));
    a->mv = mv;
    return a;
}

/* Where one trace's observations go: the batch's sums, and the models in the order of their first observation
 * in this trace (StageHistograms gives out series slots in that order, which matters at max_model_versions). */
typedef struct {
    Obs *o;
    PyObject *tid;
    PyObject *models; /* list, created on the first observation */
    int group;
} Emit;

static int emit(Emit *e, PyObject *mv, int stage, uint64_t from, uint64_t to) {
    Obs *o = e->o;
    Agg *a = obs_slot(o, mv);
    if (a == NULL) return -1;
    if (a->group != e->group) {
        a->group = e->group;
        if (e->models == NULL && (e->models = PyList_New(0)) == NULL) return -1;
        if (PyList_Append(e->models, a->mv) < 0) return -1;
    }
    /* (b - a) / 1e9 exactly as Python computes it: the int difference rounded to a double, divided. */
    double secs = (double)(to - from) / 1e9;
    int lo = 0, hi = o->nb; /* bisect_left */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (o->bounds[mid] < secs) lo = mid + 1;
        else hi = mid;
    }
    if (!a->present[stage]) {
        if (o->nord == o->capord) {
            int cap = o->capord ? o->capord * 2 : 16;
            int(*ord)[2] = PyMem_Realloc(o->ord, sizeof(*ord) * (size_t)cap);
            if (ord == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            o->ord = ord;
            o->capord = cap;
        }
        o->ord[o->nord][0] = (int)(a - o->aggs);
        o->ord[o->nord][1] = stage;
        o->nord++;
        a->present[stage] = 1;
    }
    a->counts[stage][lo]++;
    a->sum[stage] += secs;
    a->ex_tid[stage][lo] = e->tid;
    a->ex_secs[stage][lo] = secs;
    return 0;
}

/* stages._gaps for one (stage, from, to, alternative from, alternative to). */
static int gap(Emit *e, PyObject *mv, const SpanC *s, int stage, int ea, int eb, int alt_a, int alt_b) {
    uint64_t x, y;
    if (s->evmask & (1u << ea)) x = s->ev[ea];
    else if (alt_a >= 0 && (s->evmask & (1u << alt_a))) x = s->ev[alt_a];
    else return 0;
    if (s->evmask & (1u << eb)) y = s->ev[eb];
    else if (alt_b >= 0 && (s->evmask & (1u << alt_b))) y = s->ev[alt_b];
    else return 0;
    return y >= x ? emit(e, mv, stage, x, y) : 0;
}

static int ev_get(const SpanC *c, const SpanC *m, int ev, uint64_t *out) {
    if (c->evmask & (1u << ev)) { *out = c->ev[ev]; return 1; }
    if (m->evmask & (1u << ev)) { *out = m->ev[ev]; return 1; }
    return 0;
}

/* The three stage groups of stages.py, for model span m (with its compute child c / parent p). */
static int request_obs(Emit *e, const SpanC *m) {
    return gap(e, m->model, m, ST_REQUEST, EV_REQUEST_START, EV_REQUEST_END, -1, -1);
}

static int compute_obs(Emit *e, const SpanC *m, const SpanC *c) {
    uint64_t q, cs;
    if (ev_get(c, m, EV_QUEUE_START, &q) && ev_get(c, m, EV_COMPUTE_START, &cs) && cs >= q &&
        emit(e, m->model, ST_QUEUE, q, cs) < 0)
        return -1;
    if (gap(e, m->model, c, ST_C_IN, EV_COMPUTE_START, EV_COMPUTE_INPUT_END, -1, -1) < 0) return -1;
    if (gap(e, m->model, c, ST_C_INFER, EV_COMPUTE_INPUT_END, EV_COMPUTE_OUTPUT_START, -1, -1) < 0) return -1;
    return gap(e, m->model, c, ST_C_OUT, EV_COMPUTE_OUTPUT_START, EV_COMPUTE_END, -1, -1);
}

static int parent_obs(Emit *e, const SpanC *m, const SpanC *p) {
    if (gap(e, m->model, p, ST_NET, EV_HTTP_RECV_START, EV_HTTP_RECV_END, EV_GRPC_WAITREAD_START,
            EV_GRPC_WAITREAD_END) < 0)
        return -1;
    return gap(e, m->model, p, ST_SEND, EV_HTTP_SEND_START, EV_HTTP_SEND_END, EV_GRPC_SEND_START, EV_GRPC_SEND_END);
}

static PyObject *hex_str(const uint8_t *p) {
    static const char digits[] = "0123456789abcdef";
    PyObject *s = PyUnicode_New(32, 127);
    if (s == NULL) return NULL;
    Py_UCS1 *d = PyUnicode_1BYTE_DATA(s);
    for (int i = 0; i < 16; i++) {
        d[2 * i] = (Py_UCS1)digits[p[i] >> 4];
        d[2 * i + 1] = (Py_UCS1)digits[p[i] & 15];
    }
    return s;
}

/* The entry of a trace seen for the first time: by_id, start, end, error, model and the pairing state
 * TraceStore.add + StageHistograms.on_stored would leave; observations go to `o`. NULL on error. */
static PyObject *fast_group(Batch *b, const GroupC *g, Obs *o, int group) {
    SpanC *sp = b->spans;
    SpanC *first = &sp[g->head];
    PyObject *key = PyTuple_GET_ITEM(first->rec, R_TRACE);
    PyObject *tid = hex_str(first->tid);
    PyObject *by_id = PyDict_New(), *comp = NULL, *waiting = NULL, *out = NULL;
    Emit em = {o, tid, NULL, group};
    if (tid == NULL || by_id == NULL || PyList_Append(o->hexes, tid) < 0) goto done;
    int smin = g->head, emax = g->head, error = 0, n = 0;
    int at[MAX_FAST_GROUP];      /* span index by arrival position */
    int partner[MAX_FAST_GROUP]; /* model spans: position of their first compute child, or -1 */
    int parent[MAX_FAST_GROUP];  /* model spans: position of their parent in this trace, or -1 */
    PyObject *model = NULL;
    for (int i = g->head; i >= 0; i = sp[i].next) {
        SpanC *s = &sp[i];
        at[n++] = i;
        if (PyDict_SetItem(by_id, PyTuple_GET_ITEM(s->rec, R_SPAN), s->rec) < 0) goto done;
        if (s->start < sp[smin].start) smin = i;
        if (s->end > sp[emax].end) emax = i;
        error |= s->error;
        if (s->model != NULL && (model == NULL || PyUnicode_GET_LENGTH(PyTuple_GET_ITEM(model, 0)) == 0))
            model = s->model;
        if (s->is_compute) {
            /* stage_compute: the first compute span of each parent */
            PyObject *pk = PyTuple_GET_ITEM(s->rec, R_PARENT);
            if (comp == NULL && (comp = PyDict_New()) == NULL) goto done;
            int has = PyDict_Contains(comp, pk);
            if (has < 0 || (!has && PyDict_SetItem(comp, pk, s->rec) < 0)) goto done;
        }
    }
    for (int k = 0; k < n; k++) {
        const SpanC *m = &sp[at[k]];
        partner[k] = parent[k] = -1;
        if (m->model == NULL) continue;
        for (int j = 0; j < n; j++) {
            const SpanC *x = &sp[at[j]];
            if (partner[k] < 0 && x->is_compute && memcmp(x->pid, m->sid, 8) == 0) partner[k] = j;
            if (parent[k] < 0 && m->pid != NULL && memcmp(x->sid, m->pid, 8) == 0) parent[k] = j;
        }
        if (m->pid != NULL && parent[k] < 0) {
            /* stage_waiting: model spans whose parent has not come yet, by the parent's id */
            PyObject *pk = PyTuple_GET_ITEM(m->rec, R_PARENT);
            if (waiting == NULL && (waiting = PyDict_New()) == NULL) goto done;
            PyObject *lst = PyDict_GetItemWithError(waiting, pk);
            if (lst == NULL) {
                if (PyErr_Occurred() || (lst = PyList_New(0)) == NULL) goto done;
                int rc = PyDict_SetItem(waiting, pk, lst);
                Py_DECREF(lst);
                if (rc < 0) goto done;
            }
            if (PyList_Append(lst, m->rec) < 0) goto done;
        }
    }
    /* The observations in the order StageHistograms.on_stored makes them when the spans are stored one by one
     * in arrival order: each group of stages when the later of its spans arrives. */
    for (int k = 0; k < n; k++) {
        const SpanC *r = &sp[at[k]];
        if (r->model != NULL) {
            if (request_obs(&em, r) < 0) goto done;
            if (partner[k] >= 0 && partner[k] < k && compute_obs(&em, r, &sp[at[partner[k]]]) < 0) goto done;
            if (parent[k] >= 0 && parent[k] <= k && parent_obs(&em, r, &sp[at[parent[k]]]) < 0) goto done;
        } else if (r->is_compute) {
            for (int m = 0; m < k; m++)
                if (partner[m] == k && sp[at[m]].model != NULL && compute_obs(&em, &sp[at[m]], r) < 0) goto done;
        }
        /* model spans that came before their parent r (stage_waiting, popped when r is stored) */
        for (int m = 0; m < k; m++)
            if (parent[m] == k && sp[at[m]].model != NULL && parent_obs(&em, &sp[at[m]], r) < 0) goto done;
    }
    out = PyTuple_Pack(10, key, tid, by_id, PyTuple_GET_ITEM(sp[smin].rec, R_START),
                       PyTuple_GET_ITEM(sp[emax].rec, R_END), error ? Py_True : Py_False,
                       model ? model : Py_None, comp ? comp : Py_None, waiting ? waiting : Py_None,
                       em.models ? em.models : Py_None);
done:
    Py_XDECREF(tid);
    Py_XDECREF(by_id);
    Py_XDECREF(comp);
    Py_XDECREF(waiting);
    Py_XDECREF(em.models);
    return out;
}

/* The items of a decoded batch (see the top of this file). */
static PyObject *group_batch(Batch *b, PyObject *plain, PyObject *kept, Py_ssize_t limit, const double *bounds,
                             int nb) {
    Py_ssize_t n = b->n;
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap <<= 1;
    int *table = PyMem_Malloc(sizeof(int) * cap);
    GroupC *groups = PyMem_Malloc(sizeof(GroupC) * (size_t)(n ? n : 1));
    PyObject *items = PyList_New(0), *run = NULL, *res = NULL;
    Obs o = {bounds, nb, NULL, 0, 0, PyDict_New(), PyList_New(0), NULL, 0, 0};
    int ng = 0;
    if (!table || !groups || !items || !o.index || !o.hexes) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    for (size_t i = 0; i < cap; i++) table[i] = -1;
    /* groups in order of first appearance; a span with no readable trace id is a group of its own */
    for (Py_ssize_t i = 0; i < n; i++) {
        SpanC *s = &b->spans[i];
        int gi = -1;
        if (s->tid != NULL) {
            /* Python's hash of the id bytes: SipHash with a per-process random key, as the store's dicts use,
             * so that a client cannot choose ids that all collide and make a body cost quadratic time. It is
             * cached in the bytes object, which the spans of a trace often share. */
            Py_hash_t ph = PyObject_Hash(PyTuple_GET_ITEM(s->rec, R_TRACE));
            if (ph == -1 && PyErr_Occurred()) goto done;
            size_t h = (size_t)ph & (cap - 1);
            while (table[h] >= 0) {
                const SpanC *g0 = &b->spans[groups[table[h]].head];
                if (g0->tidn == s->tidn && memcmp(g0->tid, s->tid, (size_t)s->tidn) == 0) {
                    gi = table[h];
                    break;
                }
                h = (h + 1) & (cap - 1);
            }
            if (gi < 0) table[h] = ng;
        }
        if (gi < 0) {
            gi = ng++;
            groups[gi].head = groups[gi].tail = (int)i;
            groups[gi].n = 1;
        } else {
            b->spans[groups[gi].tail].next = (int)i;
            groups[gi].tail = (int)i;
            groups[gi].n++;
        }
    }
    for (int gi = 0; gi < ng; gi++) {
        GroupC *g = &groups[gi];
        SpanC *sp = b->spans;
        int fast = g->n <= MAX_FAST_GROUP && g->n <= limit && sp[g->head].tid != NULL && sp[g->head].tidn == 16;
        if (fast) {
            PyObject *key = PyTuple_GET_ITEM(sp[g->head].rec, R_TRACE);
            int in = PyDict_Contains(plain, key);
            if (in == 0) in = PyDict_Contains(kept, key);
            if (in < 0) goto done;
            fast = !in;
        }
        for (int i = g->head; fast && i >= 0; i = sp[i].next)
            if (!sp[i].fast) fast = 0;
        for (int i = g->head; fast && i >= 0; i = sp[i].next)
            for (int j = sp[i].next; fast && j >= 0; j = sp[j].next)
                if (memcmp(sp[i].sid, sp[j].sid, 8) == 0) fast = 0; /* a duplicate: the store counts it */
        if (fast) {
            PyObject *e = fast_group(b, g, &o, gi + 1);
            if (e == NULL) goto done;
            int rc = PyList_Append(items, e);
            Py_DECREF(e);
            if (rc < 0) goto done;
            run = NULL;
        } else {
            /* consecutive traces for the per-span path share one list: the order of first appearance, which
             * decides eviction order in the store, stays that of the batch */
            if (run == NULL) {
                /* the sums so far go first: the per-span path observes after them, as in arrival order */
                if (obs_flush(&o, items) < 0) goto done;
                if ((run = PyList_New(0)) == NULL) goto done;
                int rc = PyList_Append(items, run);
                Py_DECREF(run); /* items holds it */
                if (rc < 0) goto done;
            }
            for (int i = g->head; i >= 0; i = sp[i].next)
                if (PyList_Append(run, sp[i].rec) < 0) goto done;
        }
    }
    if (obs_flush(&o, items) < 0) goto done;
    res = items;
    Py_INCREF(res);
done:
    PyMem_Free(table);
    PyMem_Free(groups);
    PyMem_Free(o.aggs);
    PyMem_Free(o.ord);
    Py_XDECREF(o.index);
    Py_XDECREF(o.hexes);
    Py_XDECREF(items);
    return res;
}

/* ------------------------------------------------------------------ entry points */

static int read_bounds(PyObject *seq, double *out, int *nb) {
    PyObject *f = PySequence_Fast(seq, "bounds must be a sequence");
    if (f == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
    if (n > MAX_BUCKETS) {
        Py_DECREF(f);
        PyErr_SetString(PyExc_ValueError, "too many buckets for the native path");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(f, i));
        if (out[i] == -1.0 && PyErr_Occurred()) {
            Py_DECREF(f);
            return -1;
        }
    }
    *nb = (int)n;
    Py_DECREF(f);
    return 0;
}

static PyObject *finish(Batch *b, int rc, PyObject *plain, PyObject *kept, Py_ssize_t limit, PyObject *bseq) {
    PyObject *res = NULL;
    if (rc < 0) goto out;
    if (rc == 0) {
        res = Py_None;
        Py_INCREF(res);
        goto out;
    }
    if (plain == Py_None) {
        res = PyTuple_Pack(2, b->records, Py_None);
        goto out;
    }
    if (!PyDict_Check(plain) || !PyDict_Check(kept)) {
        PyErr_SetString(PyExc_TypeError, "plain and kept must be dicts");
        goto out;
    }
    double bounds[MAX_BUCKETS];
    int nb = 0;
    if (read_bounds(bseq, bounds, &nb) < 0) goto out;
    PyObject *g = group_batch(b, plain, kept, limit, bounds, nb);
    if (g == NULL) goto out;
    res = PyTuple_Pack(2, b->records, g);
    Py_DECREF(g);
out:
    batch_free(b);
    return res;
}

static PyObject *py_ingest_pb(PyObject *self, PyObject *args) {
    Py_buffer body;
    PyObject *service_fn, *plain, *kept, *bseq;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "y*OOOnO", &body, &service_fn, &plain, &kept, &limit, &bseq)) return NULL;
    Batch b;
    if (batch_init(&b) < 0) {
        PyBuffer_Release(&body);
        return NULL;
    }
    int rc = pb_decode(&b, service_fn, (const uint8_t *)body.buf, (size_t)body.len);
    PyBuffer_Release(&body);
    return finish(&b, rc, plain, kept, limit, bseq);
}

static PyObject *py_ingest_json(PyObject *self, PyObject *args) {
    PyObject *doc, *slow, *result, *plain, *kept, *bseq;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "OOOOOnO", &doc, &slow, &result, &plain, &kept, &limit, &bseq)) return NULL;
    Batch b;
    if (batch_init(&b) < 0) return NULL;
    int rc = json_decode(&b, doc, slow, result);
    return finish(&b, rc, plain, kept, limit, bseq);
}

static PyMethodDef methods[] = {
    {"ingest_pb", py_ingest_pb, METH_VARARGS,
     "ingest_pb(body, service_fn, plain, kept, limit, bounds) -> None | (records, items)"},
    {"ingest_json", py_ingest_json, METH_VARARGS,
     "ingest_json(doc, slow_span, result, plain, kept, limit, bounds) -> None | (records, items)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_otlpfast", NULL, -1, methods};

#define INTERN(var, text) \
    do { if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL; } while (0)

PyMODINIT_FUNC PyInit__otlpfast(void) {
    for (int i = 0; i < 256; i++)
        HEXVAL[i] = i >= '0' && i <= '9' ? (uint8_t)(i - '0')
                    : i >= 'a' && i <= 'f' ? (uint8_t)(i - 'a' + 10)
                    : i >= 'A' && i <= 'F' ? (uint8_t)(i - 'A' + 10) : 16;
    for (int i = 0; i < NEV; i++) {
        EV_LENS[i] = strlen(EV_NAMES[i]);
        INTERN(s_ev[i], EV_NAMES[i]);
    }
    INTERN(s_empty, "");
    INTERN(s_compute, "compute");
    INTERN(s_model_attr, MODEL_ATTR);
    INTERN(s_version_attr, VERSION_ATTR);
    INTERN(s_service_name, "service.name");
    INTERN(k_resourceSpans, "resourceSpans");
    INTERN(k_resource, "resource");
    INTERN(k_attributes, "attributes");
    INTERN(k_key, "key");
    INTERN(k_value, "value");
    INTERN(k_stringValue, "stringValue");
    INTERN(k_intValue, "intValue");
    INTERN(k_doubleValue, "doubleValue");
    INTERN(k_boolValue, "boolValue");
    INTERN(k_scopeSpans, "scopeSpans");
    INTERN(k_ils, "instrumentationLibrarySpans");
    INTERN(k_spans, "spans");
    INTERN(k_code, "code");
    INTERN(k_message, "message");
    INTERN(s_status_names[0], "STATUS_CODE_UNSET");
    INTERN(s_status_names[1], "STATUS_CODE_OK");
    INTERN(s_status_names[2], "STATUS_CODE_ERROR");
    static const char *kinds[6] = {"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER",
                                   "SPAN_KIND_CLIENT", "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"};
    for (int i = 0; i < 6; i++) INTERN(s_kind_names[i], kinds[i]);
    if ((i_fmt_json = PyLong_FromLong(FMT_JSON)) == NULL || (i_fmt_pb = PyLong_FromLong(FMT_PB)) == NULL)
        return NULL;
    return PyModule_Create(&moduledef);
}
