/* CPU of the controller's admission pass decisions with a deep queue and
 * preemption on: gq_queue_plan over Q queued pods in N quotas, then
 * gq_preempt_plan for the first pod the plan leaves waiting, over R
 * admitted pods. Pure CPU, no API server: the figures are what the leader
 * spends deciding, per pass, beside the plan alone (the baseline measured
 * in the same run). Figures only: nothing is asserted. With -b 1 every
 * quota may borrow from one cohort with room for half the queue, so every
 * queued pod is a borrower decided by fair share (weights 1, 2, 3).
 * usage: bench_preempt_micro [-q QUEUED] [-r RUNNING] [-n QUOTAS] [-i PASSES] [-b 0|1] */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "quota/preempt.h"

#define GI (1024LL * 1024 * 1024)

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static gq_amounts mem(int64_t gib)
{
    gq_amounts a;
    memset(&a, 0, sizeof(a));
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        a.set[k] = true;
    a.v[GQ_KEY_GPU_MEMORY] = gib * GI;
    a.v[GQ_KEY_GPU_PODS] = 1;
    return a;
}

typedef struct world {
    size_t nq, nqueued, nrun;
    bool borrow;
    gq_queue_cohort cohort;
    gq_quota *quotas;
    gq_queue_quota *pq;
    gq_queue_entry *ents;
    gq_queue_decision *dec;
    gq_preempt_pod *pods;
    size_t *qidx; /* one quota per pod, queued then running */
    char (*uids)[40];
} world;

/* Every quota is full of its running pods (8Gi each, priority 1..10);
 * every queued pod asks 8Gi at priority 100: none fits, each could
 * preempt. */
static int build(world *w)
{
    size_t total = w->nqueued + w->nrun;
    w->quotas = calloc(w->nq, sizeof(*w->quotas));
    w->pq = calloc(w->nq, sizeof(*w->pq));
    w->ents = calloc(w->nqueued, sizeof(*w->ents));
    w->dec = calloc(w->nqueued, sizeof(*w->dec));
    w->pods = calloc(w->nrun, sizeof(*w->pods));
    w->qidx = calloc(total, sizeof(*w->qidx));
    w->uids = calloc(total, sizeof(*w->uids));
    if (!w->quotas || !w->pq || !w->ents || !w->dec || !w->pods || !w->qidx || !w->uids)
        return -1;
    size_t per = w->nrun / w->nq;
    for (size_t j = 0; j < w->nq; j++) {
        w->quotas[j].name = "q";
        w->quotas[j].hard.set[GQ_KEY_GPU_MEMORY] = true;
        w->quotas[j].hard.v[GQ_KEY_GPU_MEMORY] = (int64_t)per * 8 * GI;
        w->quotas[j].within_quota = GQ_PREEMPT_LOWER_PRIORITY;
        w->quotas[j].fair_weight_milli = 1000 * (int64_t)(1 + j % 3);
        w->quotas[j].borrowing_limit.set[GQ_KEY_GPU_MEMORY] = w->borrow;
        w->quotas[j].borrowing_limit.v[GQ_KEY_GPU_MEMORY] = INT64_MAX / 4;
    }
    for (size_t i = 0; i < total; i++) {
        snprintf(w->uids[i], sizeof w->uids[i], "uid-%zu", i);
        w->qidx[i] = i % w->nq;
    }
    for (size_t i = 0; i < w->nqueued; i++)
        w->ents[i] = (gq_queue_entry){.uid = w->uids[i],
                                      .priority = 100,
                                      .created_us = (int64_t)i,
                                      .charge = mem(8),
                                      .quotas = &w->qidx[i],
                                      .n_quotas = 1};
    for (size_t i = 0; i < w->nrun; i++) {
        size_t u = w->nqueued + i;
        w->pods[i] = (gq_preempt_pod){.uid = w->uids[u],
                                      .priority = (int32_t)(1 + i % 10),
                                      .created_us = (int64_t)i,
                                      .admitted_us = (int64_t)i,
                                      .charge = mem(8),
                                      .quotas = &w->qidx[u],
                                      .n_quotas = 1};
    }
    return 0;
}

static void reset(world *w)
{
    size_t per = w->nrun / w->nq;
    gq_amounts room = mem((int64_t)(w->nqueued / 2) * 8);
    w->cohort = (gq_queue_cohort){.free = room, .lendable = room};
    for (size_t j = 0; j < w->nq; j++)
        w->pq[j] = (gq_queue_quota){.q = &w->quotas[j],
                                    .in_use = mem((int64_t)per * 8),
                                    .cohort = w->borrow ? &w->cohort : NULL};
}

int main(int argc, char **argv)
{
    world w = {.nq = 100, .nqueued = 10000, .nrun = 10000};
    int passes = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        size_t v = strtoul(argv[i + 1], NULL, 10);
        if (!strcmp(argv[i], "-q"))
            w.nqueued = v;
        else if (!strcmp(argv[i], "-r"))
            w.nrun = v;
        else if (!strcmp(argv[i], "-n"))
            w.nq = v ? v : 1;
        else if (!strcmp(argv[i], "-i"))
            passes = (int)v;
        else if (!strcmp(argv[i], "-b"))
            w.borrow = v != 0;
    }
    if (build(&w)) {
        fprintf(stderr, "bench_preempt_micro: out of memory\n");
        return 1;
    }
    size_t *victims = calloc(w.nrun ? w.nrun : 1, sizeof(*victims)), nv = 0;
    gq_err err;
    double plan = 0, preempt = 0;
    for (int p = 0; p < passes; p++) {
        reset(&w);
        double t0 = cpu_s();
        if (gq_queue_plan(w.ents, w.nqueued, w.pq, w.nq, w.dec, &err)) {
            fprintf(stderr, "plan: %s\n", err.msg);
            return 1;
        }
        double t1 = cpu_s();
        gq_preempt_ask ask = {.members = &w.ents[0],
                              .n_members = 1,
                              .quotas = w.pq,
                              .nq = w.nq,
                              .pods = w.pods,
                              .n_pods = w.nrun};
        if (gq_preempt_plan(&ask, victims, &nv, &err)) {
            fprintf(stderr, "preempt: %s\n", err.msg);
            return 1;
        }
        double t2 = cpu_s();
        plan += t1 - t0;
        preempt += t2 - t1;
    }
    printf("queued pods %zu, admitted pods %zu, quotas %zu, passes %d%s\n", w.nqueued, w.nrun, w.nq,
           passes, w.borrow ? ", every queued pod a borrower (fair sharing)" : "");
    printf("  gq_queue_plan:   %8.3f ms CPU per pass (baseline)\n", plan / passes * 1e3);
    printf("  gq_preempt_plan: %8.3f ms CPU per preemptor, victims %zu\n", preempt / passes * 1e3,
           nv);
    printf("  a pass with one preemption: %.2fx the plan alone\n",
           plan > 0 ? (plan + preempt) / plan : 0.0);
    free(victims);
    return 0;
}
