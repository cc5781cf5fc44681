/*
 * The MPI backend: Open MPI's libmpi.so.40, loaded with dlopen when the world
 * group is first initialised (no link-time dependency: a program that never
 * uses distributed runs without MPI installed). The few MPI entry points and
 * handles used are looked up with dlsym; the handle types below are Open
 * MPI's ABI (MPI_Comm and MPI_Datatype are pointers to its predefined
 * objects, MPI_STATUS_IGNORE is NULL), so another MPI implementation would
 * need its own table.
 *
 * MPI is initialised with MPI_THREAD_MULTIPLE (groups run their collectives
 * on their own streams, so several threads call MPI at once) and finalised
 * at exit, unless the program initialised MPI itself.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "distributed/backend.h"
#include "util/fault.h"

typedef void *mpi_handle; /* MPI_Comm, MPI_Datatype, MPI_Errhandler, MPI_Request */

/* MPI_ERR_OTHER is Open MPI's code 16. */
enum { MPI_OK = 0, MPI_ERR_OTHER = 16, THREAD_MULTIPLE = 3, MAX_ERROR_STRING = 256 };

static struct {
    int (*Initialized)(int *);
    int (*Finalized)(int *);
    int (*Init_thread)(int *, char ***, int, int *);
    int (*Finalize)(void);
    int (*Comm_rank)(mpi_handle, int *);
    int (*Comm_size)(mpi_handle, int *);
    int (*Comm_split)(mpi_handle, int, int, mpi_handle *);
    int (*Comm_free)(mpi_handle *);
    int (*Comm_dup)(mpi_handle, mpi_handle *);
    int (*Comm_set_errhandler)(mpi_handle, mpi_handle);
    int (*Isend)(const void *, int, mpi_handle, int, int, mpi_handle, mpi_handle *);
    int (*Irecv)(void *, int, mpi_handle, int, int, mpi_handle, mpi_handle *);
    int (*Wait)(mpi_handle *, void *);
    int (*Send)(const void *, int, mpi_handle, int, int, mpi_handle);
    int (*Recv)(void *, int, mpi_handle, int, int, mpi_handle, void *);
    int (*Error_string)(int, char *, int *);
    mpi_handle comm_world, byte, errors_return;
} mpi;

static void *library;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static mpi_handle world; /* this library's duplicate of MPI_COMM_WORLD */
static char load_error[256];
static char init_error[512];

static bool resolve(void **slot, const char *name)
{
    *slot = dlsym(library, name);
    if (!*slot)
        snprintf(load_error, sizeof load_error, "libmpi.so.40 has no symbol %s", name);
    return *slot != NULL;
}

static void load_library(void)
{
    /* RTLD_GLOBAL: Open MPI's own plugins resolve libmpi's symbols. */
    library = dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL);
    if (!library) {
        const char *why = dlerror();
        snprintf(load_error, sizeof load_error, "cannot load libmpi.so.40 (Open MPI): %s",
                 why ? why : "unknown reason");
        return;
    }
#define FN(field) resolve((void **)&mpi.field, "MPI_" #field)
    bool ok = FN(Initialized) && FN(Finalized) && FN(Init_thread) && FN(Finalize) &&
              FN(Comm_rank) && FN(Comm_size) && FN(Comm_split) && FN(Comm_free) &&
              FN(Comm_dup) && FN(Comm_set_errhandler) && FN(Isend) &&
              FN(Irecv) && FN(Wait) && FN(Send) && FN(Recv) && FN(Error_string) &&
              resolve(&mpi.comm_world, "ompi_mpi_comm_world") &&
              resolve(&mpi.byte, "ompi_mpi_byte") &&
              resolve(&mpi.errors_return, "ompi_mpi_errors_return");
#undef FN
    if (!ok) {
        dlclose(library);
        library = NULL;
    }
}

bool wf__mpi_available(void)
{
    pthread_once(&load_once, load_library);
    return library != NULL;
}

static wf_status mpi_failed(const char *what, int code)
{
    char text[MAX_ERROR_STRING] = "";
    int len = 0;
    if (mpi.Error_string(code, text, &len) != MPI_OK)
        snprintf(text, sizeof text, "error %d", code);
    return wf__error(WF_ERR_DISTRIBUTED, "distributed: %s failed: %s", what, text);
}

static void finalize_at_exit(void)
{
    int finalized = 1;
    if (mpi.Finalized(&finalized) == MPI_OK && !finalized)
        mpi.Finalize();
}

static void init_world(void)
{
    if (!wf__mpi_available()) {
        snprintf(init_error, sizeof init_error, "%s", load_error);
        return;
    }
    int initialized = 0;
    mpi.Initialized(&initialized);
    int provided = 0;
    if (!initialized) {
        int code = mpi.Init_thread(NULL, NULL, THREAD_MULTIPLE, &provided);
        if (code != MPI_OK) {
            snprintf(init_error, sizeof init_error, "MPI_Init_thread failed (%d)", code);
            return;
        }
        atexit(finalize_at_exit);
        if (provided < THREAD_MULTIPLE) {
            snprintf(init_error, sizeof init_error,
                     "MPI gives thread level %d, weft needs MPI_THREAD_MULTIPLE", provided);
            return;
        }
    }
    mpi_handle dup = NULL;
    if (mpi.Comm_dup(mpi.comm_world, &dup) != MPI_OK) {
        snprintf(init_error, sizeof init_error, "MPI_Comm_dup of the world failed");
        return;
    }
    mpi.Comm_set_errhandler(dup, mpi.errors_return);
    world = dup;
}

void *wf__mpi_world(void)
{
    pthread_once(&init_once, init_world);
    if (!world)
        wf__error(WF_ERR_UNSUPPORTED, "distributed: %s", init_error);
    return world;
}

/* MPI counts bytes in int: callers split what is larger (max_message). */
static bool fits_int(size_t n) { return n <= (size_t)INT_MAX; }

static wf_status too_large(const char *what)
{
    return wf__error(WF_ERR_INTERNAL, "distributed: %s of more than INT_MAX bytes in one MPI call",
                     what);
}

static int comm_rank(void *comm)
{
    int r = -1;
    mpi.Comm_rank(comm, &r);
    return r;
}

static int comm_size(void *comm)
{
    int n = 0;
    mpi.Comm_size(comm, &n);
    return n;
}

static wf_status comm_split(void *comm, int color, int key, void **out)
{
    mpi_handle split = NULL;
    /* A new communicator can fail to be made (Open MPI out of context ids, a
     * dead peer), so the split counts as a fallible operation (util/fault.h):
     * an injected failure returns before MPI is called, and since every rank
     * runs the same operations, every rank fails the same split. */
    int code = wf__fault_hit() ? MPI_ERR_OTHER : mpi.Comm_split(comm, color, key, &split);
    if (code != MPI_OK)
        return mpi_failed("MPI_Comm_split", code);
    mpi.Comm_set_errhandler(split, mpi.errors_return);
    *out = split;
    return WF_OK;
}

static void comm_free(void *comm)
{
    int finalized = 1;
    if (comm && mpi.Finalized(&finalized) == MPI_OK && !finalized)
        mpi.Comm_free((mpi_handle *)&comm);
}

static wf_status post(void *comm, wf_comm_message *m, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!fits_int(m[i].bytes))
            return too_large("a message");
        int code = m[i].receive ? mpi.Irecv(m[i].data, (int)m[i].bytes, mpi.byte, m[i].peer,
                                            m[i].tag, comm, &m[i].request)
                                : mpi.Isend(m[i].data, (int)m[i].bytes, mpi.byte, m[i].peer,
                                            m[i].tag, comm, &m[i].request);
        if (code != MPI_OK)
            return mpi_failed(m[i].receive ? "MPI_Irecv" : "MPI_Isend", code);
    }
    return WF_OK;
}

static wf_status wait(void *comm, wf_comm_message *m, size_t n)
{
    (void)comm;
    for (size_t i = 0; i < n; i++) {
        int code = mpi.Wait(&m[i].request, NULL);
        if (code != MPI_OK)
            return mpi_failed("MPI_Wait", code);
    }
    return WF_OK;
}

static wf_status send_bytes(void *comm, const void *data, size_t bytes, int dst, int tag)
{
    if (!fits_int(bytes))
        return too_large("send");
    int code = mpi.Send(data, (int)bytes, mpi.byte, dst, tag, comm);
    return code == MPI_OK ? WF_OK : mpi_failed("MPI_Send", code);
}

static wf_status recv_bytes(void *comm, void *data, size_t bytes, int src, int tag)
{
    if (!fits_int(bytes))
        return too_large("recv");
    int code = mpi.Recv(data, (int)bytes, mpi.byte, src, tag, comm, NULL);
    return code == MPI_OK ? WF_OK : mpi_failed("MPI_Recv", code);
}

const wf_comm_backend wf__mpi_backend = {
    .name = "mpi",
    .rank = comm_rank,
    .size = comm_size,
    .split = comm_split,
    .free = comm_free,
    .max_message = INT_MAX,
    .post = post,
    .wait = wait,
    .send = send_bytes,
    .recv = recv_bytes,
};
