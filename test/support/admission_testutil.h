/* Helpers shared by the admission tests (cmocka assertions inside). */
#ifndef ADMISSION_TESTUTIL_H
#define ADMISSION_TESTUTIL_H

#include <stddef.h>

#include <json-c/json.h>

/* The whole of test/data/NAME, NUL-terminated; caller frees. */
char *at_read_data(const char *name, size_t *len);

/* test/data/NAME parsed as JSON; caller puts. */
json_object *at_load_json(const char *name);

/* The decoded response.patch of an encoded AdmissionReview, NUL-terminated
 * (caller frees); asserts patchType is JSONPatch. */
char *at_response_patch(const char *review, size_t len, size_t *patch_len);

/* A Pod (JSON text, caller frees) in namespace ns with n_ctrs app
 * containers, each as heavy as a real one (env, volume mounts, ports,
 * probes, cpu and memory), about 700 bytes apiece; the last container's
 * resources.limits get last_limits (a JSON object's members, e.g.
 * "\"gpuquota.io/gpu-memory\":\"1Gi\"") when not NULL. For tests of pods
 * far past every cap that applies to GPU pods only. */
char *at_large_pod(const char *ns, size_t n_ctrs, const char *last_limits);

/* An AdmissionReview (JSON text, caller frees) creating pod (JSON text) in
 * ns, as kube-apiserver sends it. */
char *at_pod_create_review(const char *uid, const char *ns, const char *pod);

#endif
