/*
 * A keyed hash for tables whose keys come from files (the names of a
 * parameter list and GGUF metadata keys through util/name_index.h, a
 * WordPiece vocabulary). A file is hostile input: with an
 * unkeyed hash (FNV-1a) its author can choose thousands of names that fall
 * into one chain of an open-addressing table, and loading it then takes
 * quadratic time. SipHash-1-3 under a key drawn at random once per process
 * leaves them no way to aim at a chain. Internal.
 */
#ifndef WEFT_UTIL_HASH_H
#define WEFT_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>

/* SipHash-1-3 of n bytes under this process's key. Thread-safe; the same
 * bytes hash alike for the process's lifetime (and in a forked child). */
uint64_t wf__hash_bytes(const void *data, size_t n);

#endif
