/* A stand-in for libnccl.so.2 that records the calls made to it, for
 * tests/nccl_binding.rs: the binding (src/nccl.rs) is checked on machines without a GPU
 * against the constants and signatures of nccl.h, which this file restates. It touches no
 * memory behind the pointers it is given. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>

typedef struct { char internal[128]; } ncclUniqueId;
typedef void *ncclComm_t;
typedef void *cudaStream_t;
/* nccl.h 2.14's ncclConfig_t; later NCCL appends fields and reads only `size` bytes */
typedef struct { size_t size; unsigned int magic; unsigned int version; int blocking; } ncclConfig_t;
/* nccl.h: ncclResult_t, ncclDataType_t, ncclRedOp_t are C enums (ints) */

static char log_buf[16384];
static int async_error = 0;
/* non-blocking work in flight: the next `pending` asynchronous-error queries answer
 * ncclInProgress (7); -1: every query, as when a peer never comes */
static int pending = 0;
static int group_in_progress = 0;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void say(const char *fmt, ...) {
    size_t n = strlen(log_buf);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(log_buf + n, sizeof log_buf - n, fmt, ap);
    va_end(ap);
    n = strlen(log_buf);
    if (n + 1 < sizeof log_buf) { log_buf[n] = '\n'; log_buf[n + 1] = 0; }
}

/* test hooks */
const char *fake_log(void) { return log_buf; }
void fake_clear(void) { log_buf[0] = 0; }
void fake_set_async_error(int e) { async_error = e; }
void fake_set_pending(int n) { pending = n; }
/* ncclGroupEnd answers ncclInProgress and leaves two queries in progress, as NCCL does on a
 * non-blocking communicator */
void fake_set_group_in_progress(int on) { group_in_progress = on; }

int ncclGetVersion(int *v) {
    const char *e = getenv("FAKE_NCCL_VERSION");
    *v = e ? atoi(e) : 22703;
    return 0;
}
int ncclGetUniqueId(ncclUniqueId *id) {
    for (int i = 0; i < 128; i++) id->internal[i] = (char)(i * 3 + 1);
    say("GetUniqueId");
    return 0;
}
int ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    unsigned sum = 0;
    for (int i = 0; i < 128; i++) sum = sum * 31u + (unsigned char)id.internal[i];
    say("CommInitRank nranks=%d rank=%d id=%u", nranks, rank, sum);
    *comm = (ncclComm_t)0x1234;
    return 0;
}
/* answers ncclInProgress (7) while `pending` is set, as a non-blocking init does */
int ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config) {
    unsigned sum = 0;
    for (int i = 0; i < 128; i++) sum = sum * 31u + (unsigned char)id.internal[i];
    say("CommInitRankConfig nranks=%d rank=%d id=%u size=%zu magic=%x version=%u blocking=%d", nranks, rank, sum,
        config->size, config->magic, config->version, config->blocking);
    *comm = (ncclComm_t)0x1234;
    return pending ? 7 : 0;
}
int ncclCommAbort(ncclComm_t comm) { say("CommAbort comm=%p", comm); pending = 0; return 0; }
int ncclCommGetAsyncError(ncclComm_t comm, int *e) {
    (void)comm;
    if (pending) {
        if (pending > 0) pending--;
        say("GetAsyncError in progress");
        *e = 7;
    } else {
        *e = async_error;
    }
    return 0;
}
const char *ncclGetErrorString(int r) { return r == 4 ? "invalid argument (fake)" : "some error (fake)"; }
/* a count of 13 stands for a call NCCL refuses: ncclInvalidArgument (4) */
int ncclAllReduce(const void *s, void *r, size_t count, int type, int op, ncclComm_t comm, cudaStream_t st) {
    say("AllReduce send=%p recv=%p count=%zu type=%d op=%d comm=%p stream=%p", s, r, count, type, op, comm, st);
    return count == 13 ? 4 : 0;
}
int ncclReduce(const void *s, void *r, size_t count, int type, int op, int root, ncclComm_t comm, cudaStream_t st) {
    say("Reduce send=%p recv=%p count=%zu type=%d op=%d root=%d comm=%p stream=%p", s, r, count, type, op, root, comm, st);
    return 0;
}
int ncclBroadcast(const void *s, void *r, size_t count, int type, int root, ncclComm_t comm, cudaStream_t st) {
    say("Broadcast send=%p recv=%p count=%zu type=%d root=%d comm=%p stream=%p", s, r, count, type, root, comm, st);
    return 0;
}
int ncclGroupStart(void) { say("GroupStart"); return 0; }
int ncclGroupEnd(void) {
    say("GroupEnd");
    if (group_in_progress) { pending = 2; return 7; }
    return 0;
}
