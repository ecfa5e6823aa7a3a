/* json_schema_gbnf.h — a JSON Schema -> a GBNF grammar whose sentences are
 * JSON texts valid under the schema (vt serve's response_format and
 * json_schema fields).
 *
 * The grammar generates a subset of the valid documents, never an invalid
 * one: properties come in the order the schema lists them and only the
 * declared ones (additional properties are generated only for an object
 * without declared properties), strings and arrays longer than 1000 are not
 * generated, numbers with bounds are integers, whitespace between tokens is
 * at most one space, or one newline and up to 20 spaces or tabs (so a model
 * cannot run on whitespace forever). A keyword that constrains the value and
 * that this converter does not implement is refused with its path, never
 * dropped; annotations (title, description, examples, default, $schema,
 * $id, $comment, deprecated, readOnly, writeOnly) are ignored. The subset
 * is listed in README.md. */
#ifndef VT_JSON_SCHEMA_GBNF_H
#define VT_JSON_SCHEMA_GBNF_H

#include <jansson.h>
#include <stddef.h>

/* Limits that keep a hostile schema's grammar small. */
#define VT_SCHEMA_MAX_DEPTH 64          /* schemas inside schemas ($ref chains included) */
#define VT_SCHEMA_MAX_GRAMMAR (512 * 1024) /* bytes of GBNF */

/* The grammar (malloc'ed, NUL-terminated), or NULL with err: "PATH: what"
 * where PATH is a JSON pointer into the schema ("/properties/age": ...;
 * "" is the schema itself). */
char *vt_json_schema_to_gbnf(const json_t *schema, char *err, size_t err_size);

/* The same grammar with its top rule named `rule` instead of root, for a
 * grammar that embeds the JSON in text of its own (a tool call's markers);
 * the other rules' names all start with `rule` or name JSON primitives, so
 * `rule` should be a name those cannot take (not "root"). */
char *vt_json_schema_to_gbnf_rule(const json_t *schema, const char *rule, char *err, size_t err_size);

/* The grammar of any JSON object (response_format json_object). */
char *vt_json_object_gbnf(void);

#endif
