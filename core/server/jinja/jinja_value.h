/* jinja_value.h — the values a chat template computes with: Python's none,
 * bool, int, float, str, list, dict (insertion order kept), plus jinja2's
 * Undefined, callables (builtins, macros) and namespace().
 *
 * A jv is a small struct passed by value; strings, lists, dicts, namespaces
 * and callables live on the heap with a reference count. Functions that
 * return a jv return a new reference (release it with jv_decref); arguments
 * are borrowed. Lists and dicts are shared, not copied, exactly as Python
 * shares them: list.append and namespace assignment are seen by every
 * holder. Strings are UTF-8 bytes; length, indexing and slicing count code
 * points, as Python's str does. */
#ifndef VT_JINJA_VALUE_H
#define VT_JINJA_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "text_buf.h"

typedef enum jv_type {
    JV_UNDEFINED, /* jinja2's default Undefined: prints "", falsy, iterates as empty */
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STRING,
    JV_LIST, /* Python's list and tuple */
    JV_DICT,
    JV_NAMESPACE, /* namespace(): a dict whose attributes may be assigned */
    JV_FUNC,      /* a builtin, a macro or a call block's caller */
} jv_type;

typedef struct jv_str {
    int refs;
    bool markup; /* jinja2's Markup (from |safe or |escape): adding a plain string to it escapes that string */
    size_t len;
    char data[]; /* NUL-terminated */
} jv_str;

struct jv_list;
struct jv_dict;
struct jv_func;

typedef struct jv {
    jv_type type;
    union {
        bool b;
        int64_t i;
        double f;
        jv_str *s;
        struct jv_list *l;
        struct jv_dict *d; /* JV_DICT and JV_NAMESPACE */
        struct jv_func *fn;
    } u;
    const char *undef_name; /* JV_UNDEFINED: what was looked up (static or template text), for errors */
} jv;

/* The work meter of the render running on this thread (vt_jinja_render
 * starts and stops it). Every loop over a value's parts, and every string
 * built or searched, ticks it; once past its limit it reads spent, the loops
 * stop early (their results no longer matter) and the render fails at its
 * next check. So no template, however short, makes one render run for
 * hours: a budget counted where the work is done, not guessed per
 * construct. Outside a render (limit 0) ticks count nothing. */
void jv_meter_start(uint64_t limit);
/* What a step over one item of a list or dict counts (a list slot's bytes,
 * as building one does). */
#define JV_METER_ITEM ((uint64_t)sizeof(jv))
/* Adds units; false once the meter is spent. */
bool jv_meter_tick(uint64_t units);
bool jv_meter_spent(void);

typedef struct jv_list {
    int refs;
    bool tuple; /* a Python tuple: prints as (a, b) and is not equal to a list */
    size_t n, cap;
    jv *items;
} jv_list;

typedef struct jv_dict_entry {
    jv key; /* a string (or another hashable scalar) */
    jv value;
} jv_dict_entry;

typedef struct jv_dict {
    int refs;
    size_t n, cap;
    jv_dict_entry *e;
} jv_dict;

/* Scalars (no allocation). */
jv jv_undefined(const char *name);
jv jv_none(void);
jv jv_bool(bool b);
jv jv_int(int64_t i);
jv jv_float(double f);
/* Heap values: the type JV_UNDEFINED with undef_name "out of memory" when
 * allocation fails (callers check jv_is_oom). */
jv jv_string(const char *s, size_t len);
jv jv_cstring(const char *s);
jv jv_list_new(void);
jv jv_dict_new(void);
jv jv_namespace_new(void);
bool jv_is_oom(jv v);

jv jv_incref(jv v);
void jv_decref(jv v);

/* Lists: append takes a new reference to item. */
bool jv_list_append(jv list, jv item);
/* Dicts and namespaces: set takes new references to key and value (replacing
 * an existing key's value in place, as Python does); get returns a borrowed
 * value or NULL. */
bool jv_dict_set(jv dict, jv key, jv value);
bool jv_dict_set_cstr(jv dict, const char *key, jv value); /* takes value */
const jv *jv_dict_get(jv dict, jv key);
const jv *jv_dict_get_cstr(jv dict, const char *key);

/* Python semantics. */
bool jv_truthy(jv v);
bool jv_equal(jv a, jv b); /* ==: 1 == 1.0 == True, deep on lists and dicts */
/* Why v may not be put into container (a list, dict or namespace): it is
 * the container or holds it (a value that holds itself, which reference
 * counts never free), or it goes deeper than VT_JINJA_MAX_DEPTH containers
 * (so no such cycle can hide past the search's bound); NULL when it may. */
const char *jv_holds(jv v, jv container);
bool jv_is_number(jv v);   /* int, float or bool (Python's bool is an int) */
double jv_as_double(jv v);
size_t jv_utf8_count(const char *s, size_t len);
const char *jv_type_name(jv v);


/* str(v) and repr(v) as Python writes them ({{ v }} prints str(v); lists and
 * dicts print their items' repr). */
void jv_write_str(vt_text_buf *b, jv v);
void jv_write_repr(vt_text_buf *b, jv v);
/* str(v) as a new string value. */
jv jv_to_string(jv v);

#endif
