#include "quota/pod.h"

#include <stdlib.h>
#include <string.h>

#include "common/json_member.h"
#include "common/rfc3339.h"
#include "quota/record.h"

void gq_pod_init(gq_pod *p)
{
    memset(p, 0, sizeof(*p));
    p->gate_index = -1;
    gq_pod_cost_init(&p->cost);
}

void gq_pod_dispose(gq_pod *p)
{
    if (!p)
        return;
    gq_pod_cost_dispose(&p->cost);
    gq_pod_init(p);
}

/* Price pod believing as much of it as scope->trust says, into *cost; a
 * queued pod accepting several models on each (into out's choices) and,
 * for *cost, on the first. */
static gq_code price(const gq_config *cfg, json_object *pod, const gq_cost_scope *scope,
                     gq_pod *out, gq_pod_cost *cost, gq_err *err)
{
    const gq_model *models[GQ_MAX_MODEL_CHOICES];
    gq_model_option opts[GQ_MAX_MODEL_CHOICES];
    size_t n = 0;
    json_object *first = NULL;
    gq_code rc;
    if (out->gate_index < 0 || gq_pod_model_choices(cfg, pod, models, &n, NULL) != GQ_OK || !n)
        return gq_pod_cost_compute_in(cfg, pod, scope, cost, err);
    if (!(rc = gq_queue_price_choices(cfg, pod, scope->trust, models, n, opts, err)) &&
        !(rc = gq_pod_with_model(pod, models[0]->name, &first, err)))
        rc = gq_pod_cost_compute_in(cfg, first, scope, cost, err);
    json_object_put(first);
    if (rc)
        return rc;
    out->n_choices = n;
    for (size_t i = 0; i < n; i++) {
        out->choices[i] = models[i];
        out->choice_charge[i] = opts[i].charge;
    }
    return GQ_OK;
}

/* The catalog name of the model rec pins its pod to, borrowed from cfg;
 * NULL for none, and for a model the configuration no longer knows: the pod
 * then counts against every model a quota limits (more, never less). */
static const char *recorded_model(const gq_config *cfg, const gq_pod_record *rec)
{
    const gq_model *m = rec->model[0] ? gq_config_find_model(cfg, rec->model) : NULL;
    return m ? m->name : NULL;
}

static void read_order(json_object *pod, gq_pod *p)
{
    json_object *prio = gq_json_member(gq_json_member(pod, "spec"), "priority");
    if (prio && json_object_is_type(prio, json_type_int)) {
        int64_t v = json_object_get_int64(prio);
        p->priority = (int32_t)(v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : v);
    }
    const char *ts = gq_json_meta_string(pod, "creationTimestamp");
    if (ts && gq_time_parse_rfc3339_us(ts, &p->created_us, NULL) != GQ_OK)
        p->created_us = 0;
    if (gq_pod_group_parse(pod, &p->group, NULL) != GQ_OK)
        p->group.present = false; /* refused at creation; such a pod queues alone */
}

/* What an existing pod counts: its record when it has one (its pricing
 * failing then only empties p->cost), else its price. */
static gq_code count_existing(const gq_config *cfg, json_object *pod, gq_pod *p, gq_err *err)
{
    gq_pod_record rec;
    p->recorded = gq_pod_record_read(pod, &rec, NULL) == GQ_OK;
    gq_cost_scope scope = {NULL, 0, p->recorded ? GQ_TRUST_RECORDS : GQ_TRUST_SPEC};
    gq_code rc = price(cfg, pod, &scope, p, &p->cost, err);
    if (rc) {
        if (!p->recorded || rc == GQ_ENOMEM)
            return rc;
        /* Priced at admission, not understood now: counted at its record. */
        gq_pod_cost_dispose(&p->cost);
        p->n_choices = 0;
        gq_err_clear(err);
    }
    if (p->recorded) {
        p->charge = rec.charge;
        if (rec.legacy) { /* an older version recorded the charge alone */
            p->facts.model = gq_pod_model(&p->cost);
        } else {
            p->facts.model = recorded_model(cfg, &rec);
            p->facts.terminating = rec.terminating;
        }
    } else {
        gq_charge_from_cost(&p->cost, false, &p->charge);
        p->facts.model = gq_pod_model(&p->cost);
    }
    if (p->n_choices)
        p->facts.model = NULL; /* chosen when the controller ungates it */
    return GQ_OK;
}

/* The facts quotas select a pod by, its deletion deadline, whether it has
 * ended. */
static gq_code read_facts(json_object *pod, const char *ns, gq_pod *p, gq_err *err)
{
    gq_code rc;
    if ((rc = gq_pod_facts_from_json(pod, ns ? ns : "", &p->facts, err)) ||
        (rc = gq_pod_deletion_deadline(pod, &p->delete_at, err)))
        return rc;
    p->facts.terminal = gq_pod_is_terminal(pod);
    return GQ_OK;
}

gq_code gq_pod_decode(const gq_config *cfg, json_object *pod, const gq_pod_scope *scope,
                      gq_pod *out, gq_err *err)
{
    gq_pod p;
    gq_code rc;
    gq_pod_init(&p);
    const char *ns = scope->ns ? scope->ns : gq_json_meta_string(pod, "namespace");
    p.gate_index = gq_pod_gate_index(pod);
    if (scope->admission) {
        /* Priced first: a pricing error is the one to read. Never terminal:
         * kube-apiserver sets a created pod's status to Pending
         * (PrepareForCreate) after the mutating webhooks and before the
         * validating ones, so the status a client sends counts for neither. */
        gq_cost_scope cs = {scope->lrs, scope->n_lrs, GQ_TRUST_REQUEST};
        if ((rc = gq_pod_cost_compute_in(cfg, pod, &cs, &p.cost, err)) ||
            (rc = read_facts(pod, ns, &p, err)))
            goto out;
        p.facts.terminal = false;
        gq_charge_from_cost(&p.cost, false, &p.charge);
        p.facts.model = gq_pod_model(&p.cost);
    } else if ((rc = read_facts(pod, ns, &p, err)) || (rc = count_existing(cfg, pod, &p, err))) {
        goto out;
    }
    read_order(pod, &p);
out:
    if (rc) {
        gq_pod_dispose(&p);
        return rc;
    }
    gq_pod_dispose(out);
    *out = p;
    return GQ_OK;
}
