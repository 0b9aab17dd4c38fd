#include "webhook/mutate_http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "quota/crd.h"
#include "common/gq_log.h"
#include "webhook/review.h"

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One audit record for the decision on rq. The writer counts and logs its
 * own failures (gpuquota_audit_write_errors_total); the answer stands. */
static void audit(const wh_mutate_ctx *mc, const wh_review_request *rq,
                  const wh_review_response *rs, const wh_mutate_info *info, const char *error,
                  double seconds)
{
    if (!mc->audit)
        return;
    wh_audit_record rec;
    json_object *charge = NULL;
    wh_audit_record_init(&rec, rq, "mutate");
    if (error) {
        rec.decision = "error";
        rec.reason = error;
    } else {
        rec.decision = rs->allowed ? "allowed" : "denied";
        rec.reason = rs->allowed ? NULL : rs->message;
        rec.request = info->request;
        rec.rewrite = info->rewrite;
        if (info->has_charge)
            rec.charge = charge = gq_amounts_to_json(&info->charge);
    }
    rec.latency_ms = seconds * 1000.0;
    if (wh_audit_write(mc->audit, &rec)) /* counted and logged once per burst inside */
        GQ_LOG(GQ_LOG_DEBUG, rq->uid, "audit record not written");
    json_object_put(charge);
}

/* A decided request that cannot be answered: 500, counted, audited and
 * logged once (by the server) with the admission uid. */
static void fail(const wh_mutate_ctx *mc, const wh_review_request *rq, const gq_err *err,
                 gq_code rc, double t0, http_response *resp)
{
    const char *msg = err->msg[0] ? err->msg : gq_strerror(rc);
    double dt = mono_s() - t0;
    wh_metrics_observe_admission(mc->metrics, WH_WEBHOOK_MUTATE, wh_operation_name(rq->operation),
                                 WH_DECISION_ERROR, dt);
    audit(mc, rq, NULL, NULL, msg, dt);
    snprintf(resp->uid, sizeof(resp->uid), "%s", rq->uid);
    http_response_error(resp, 500, "%s", msg);
}

void wh_mutate_handle(void *ctx, const http_request *req, http_response *resp)
{
    const wh_mutate_ctx *mc = ctx;
    double t0 = mono_s();
    wh_review_request rq;
    wh_review_response rs;
    wh_mutate_info info;
    size_t len = 0;
    char *text = NULL;
    gq_err err;
    gq_err_clear(&err);
    wh_mutate_info_init(&info);

    gq_code rc = wh_review_decode_within(req->body, req->body_len, &mc->limits, &rq, &err);
    if (rc) {
        /* Not a review, or too large to hold: no uid to answer or audit under. */
        wh_metrics_observe_admission(mc->metrics, WH_WEBHOOK_MUTATE, NULL, WH_DECISION_ERROR,
                                     mono_s() - t0);
        wh_review_answer_undecoded(req, rc, &err, resp);
        return;
    }
    rc = wh_mutate_review_store(mc->cfg, &rq, mc->store, &rs, &info, &err);
    if (rc) {
        fail(mc, &rq, &err, rc, t0, resp);
        goto out;
    }
    rc = wh_review_encode(&rs, &text, &len);
    if (rc) {
        gq_err_set(&err, rc, "encoding the response: %s", gq_strerror(rc));
        fail(mc, &rq, &err, rc, t0, resp);
        wh_review_response_dispose(&rs);
        goto out;
    }
    double dt = mono_s() - t0;
    wh_metrics_observe_admission(mc->metrics, WH_WEBHOOK_MUTATE, wh_operation_name(rq.operation),
                                 rs.allowed ? WH_DECISION_ALLOWED : WH_DECISION_DENIED, dt);
    audit(mc, &rq, &rs, &info, NULL, dt);
    wh_review_response_dispose(&rs);
    http_response_take_body(resp, 200, "application/json", text, len);
out:
    wh_mutate_info_dispose(&info);
    wh_review_request_dispose(&rq);
}
