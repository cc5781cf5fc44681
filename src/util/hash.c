/* SipHash-1-3 (one compression round per 8-byte word, three finalization
 * rounds), keyed once per process from the kernel's random source. */
#include "util/hash.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static uint64_t key[2];
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

/* Without getrandom (a seccomp sandbox, an old kernel), the clock and
 * addresses (ASLR) still keep the key out of a file author's reach. */
static void draw_key(void)
{
    if (getrandom(key, sizeof key, GRND_NONBLOCK) == (ssize_t)sizeof key)
        return;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    key[0] = (uint64_t)t.tv_nsec * 0x9e3779b97f4a7c15u ^ (uint64_t)(uintptr_t)&t;
    key[1] = (uint64_t)t.tv_sec * 0xbf58476d1ce4e5b9u ^ (uint64_t)(uintptr_t)&key;
}

static uint64_t rotate_left(uint64_t x, int bits) { return (x << bits) | (x >> (64 - bits)); }

static void sip_round(uint64_t v[4])
{
    v[0] += v[1];
    v[1] = rotate_left(v[1], 13) ^ v[0];
    v[0] = rotate_left(v[0], 32);
    v[2] += v[3];
    v[3] = rotate_left(v[3], 16) ^ v[2];
    v[0] += v[3];
    v[3] = rotate_left(v[3], 21) ^ v[0];
    v[2] += v[1];
    v[1] = rotate_left(v[1], 17) ^ v[2];
    v[2] = rotate_left(v[2], 32);
}

static void absorb(uint64_t v[4], uint64_t word)
{
    v[3] ^= word;
    sip_round(v);
    v[0] ^= word;
}

/* Little-endian, whatever the machine's byte order (the algorithm's own). */
static uint64_t load_le(const unsigned char *p, size_t n)
{
    uint64_t word = 0;
    for (size_t i = 0; i < n; i++)
        word |= (uint64_t)p[i] << (8 * i);
    return word;
}

uint64_t wf__hash_bytes(const void *data, size_t n)
{
    pthread_once(&key_once, draw_key);
    uint64_t v[4] = {key[0] ^ 0x736f6d6570736575u, key[1] ^ 0x646f72616e646f6du,
                     key[0] ^ 0x6c7967656e657261u, key[1] ^ 0x7465646279746573u};
    const unsigned char *p = data;
    const size_t whole = n - n % 8;
    for (size_t i = 0; i < whole; i += 8)
        absorb(v, load_le(p + i, 8));
    absorb(v, load_le(p + whole, n % 8) | (uint64_t)(n & 0xff) << 56);
    v[2] ^= 0xff;
    for (int r = 0; r < 3; r++)
        sip_round(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}
