/*
 * bench_submit: how fast tenk takes and finishes jobs.
 *
 * Against a running server (started by bench/submit/run with one local agent
 * and fake GPUs), it submits N trivial jobs through the HTTP API over C
 * keep-alive connections as fast as the server answers, recording each
 * submission's latency (until the server acknowledged it, durably). Then it
 * waits until every job has ended and reports:
 *
 *   submissions per second   N / (last acknowledgement - first request)
 *   completed jobs per second N / (last completion - first request)
 *   p50 / p99 submit latency
 *
 * It prints one JSON object on stdout. With BENCH_SUBMIT_ONLY=1 it does not
 * wait for the jobs (a server without nodes, where they wait): only the
 * submissions are reported.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

struct slot {
	CURL *easy;
	struct strbuf resp;
	double t0;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static size_t write_cb(char *d, size_t size, size_t n, void *u)
{
	strbuf_add(u, d, size * n);
	return size * n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static json_t *get_json(const char *url, struct curl_slist *h)
{
	CURL *e = curl_easy_init();
	struct strbuf sb;
	strbuf_init(&sb);
	curl_easy_setopt(e, CURLOPT_URL, url);
	if (getenv("TENK_CA"))
		curl_easy_setopt(e, CURLOPT_CAINFO, getenv("TENK_CA"));
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, &sb);
	curl_easy_setopt(e, CURLOPT_TIMEOUT, 60L);
	json_t *j = NULL;
	if (curl_easy_perform(e) == CURLE_OK)
		j = json_loadb(sb.buf, sb.len, 0, NULL);
	curl_easy_cleanup(e);
	strbuf_release(&sb);
	return j;
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: bench_submit URL TOKEN JOBS CONNECTIONS [GPUS_PER_TASK "
				"[FOLDER]]\n");
		return 2;
	}
	const char *url = argv[1];
	const char *token = argv[2];
	int njobs = atoi(argv[3]);
	int nconn = atoi(argv[4]);
	const char *gpus = argc > 5 ? argv[5] : "1";
	/* the jobs run, and write their output, in the caller's folder */
	const char *cwd = argc > 6 ? argv[6] : "/tmp";
	if (njobs < 1 || nconn < 1 || nconn > 1024) {
		fprintf(stderr, "bench_submit: JOBS >= 1 and 1 <= CONNECTIONS <= 1024\n");
		return 2;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	char *auth = xasprintf("Authorization: Bearer %s", token);
	struct curl_slist *h = curl_slist_append(NULL, auth);
	h = curl_slist_append(h, "Content-Type: application/json");
	h = curl_slist_append(h, "Expect:");
	char *submit_url = xasprintf("%s/v1/jobs", url);
	char *body = xasprintf("{\"command\": [\"true\"], \"cwd\": \"%s\", \"gpus_per_task\": %s}",
			       cwd, gpus);
	CURLM *m = curl_multi_init();
	curl_multi_setopt(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)nconn);
	struct slot *slots = xcalloc((size_t)nconn, sizeof(*slots));
	double *lat = xcalloc((size_t)njobs, sizeof(double));
	int sent = 0, done = 0, errors = 0;
	double start = now_s(), last_ack = start;
	for (int i = 0; i < nconn; i++) {
		slots[i].easy = curl_easy_init();
		strbuf_init(&slots[i].resp);
		CURL *e = slots[i].easy;
		curl_easy_setopt(e, CURLOPT_URL, submit_url);
		if (getenv("TENK_CA"))
			curl_easy_setopt(e, CURLOPT_CAINFO, getenv("TENK_CA"));
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
		curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
		curl_easy_setopt(e, CURLOPT_WRITEDATA, &slots[i].resp);
		curl_easy_setopt(e, CURLOPT_PRIVATE, &slots[i]);
		curl_easy_setopt(e, CURLOPT_TIMEOUT, 60L);
		if (sent < njobs) {
			slots[i].t0 = now_s();
			curl_multi_add_handle(m, e);
			sent++;
		}
	}
	while (done < sent) {
		int running;
		curl_multi_perform(m, &running);
		CURLMsg *msg;
		int left;
		while ((msg = curl_multi_info_read(m, &left))) {
			if (msg->msg != CURLMSG_DONE)
				continue;
			struct slot *s;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
			long status = 0;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &status);
			double t = now_s();
			if (msg->data.result != CURLE_OK || status != 201) {
				errors++;
				if (errors < 5)
					fprintf(stderr, "bench_submit: status %ld: %s\n", status,
						s->resp.buf);
			}
			lat[done++] = t - s->t0;
			last_ack = t;
			curl_multi_remove_handle(m, msg->easy_handle);
			strbuf_reset(&s->resp);
			if (sent < njobs) {
				s->t0 = now_s();
				curl_multi_add_handle(m, msg->easy_handle);
				sent++;
			}
		}
		if (done < sent)
			curl_multi_poll(m, NULL, 0, 100, NULL);
	}
	double submit_s = last_ack - start;
	if (getenv("BENCH_SUBMIT_ONLY")) {
		qsort(lat, (size_t)njobs, sizeof(double), cmp_double);
		printf("{\"jobs\": %d, \"connections\": %d, \"errors\": %d, "
		       "\"submit_seconds\": %.3f, \"submissions_per_s\": %.1f, "
		       "\"submit_p50_ms\": %.2f, \"submit_p99_ms\": %.2f}\n",
		       njobs, nconn, errors, submit_s, njobs / submit_s, lat[njobs / 2] * 1000,
		       lat[(int)(njobs * 0.99)] * 1000);
		return errors ? 1 : 0;
	}
	/* every job ended? ask for the active ones until none is left */
	char *active_url = xasprintf("%s/v1/jobs?state=active&limit=1", url);
	char *completed_url = xasprintf("%s/v1/jobs?state=COMPLETED&limit=1", url);
	double deadline = now_s() + 600;
	double finished = 0;
	while (now_s() < deadline) {
		json_t *j = get_json(active_url, h);
		json_int_t active = j ? json_integer_value(json_object_get(j, "total")) : -1;
		json_decref(j);
		if (active == 0) {
			finished = now_s();
			break;
		}
		usleep(10000);
	}
	json_t *j = get_json(completed_url, h);
	json_int_t completed = j ? json_integer_value(json_object_get(j, "total")) : -1;
	json_decref(j);
	/* where a job's time goes: scheduled -> started -> exited -> recorded
	 * (the list in pages, after each page's last job) */
	double legs[3] = {0, 0, 0};
	size_t nlegs = 0, idx;
	json_int_t after = 0;
	for (int page = 0; page < 100000; page++) {
		char *page_url =
			xasprintf("%s/v1/jobs?limit=1000&after=%lld", url, (long long)after);
		j = get_json(page_url, h);
		free(page_url);
		if (!json_is_array(json_object_get(j, "jobs"))) {
			fprintf(stderr, "bench_submit: the job list did not come back\n");
			json_decref(j);
			break;
		}
		json_t *job;
		json_array_foreach (json_object_get(j, "jobs"), idx, job) {
			json_t *a = json_array_get(json_object_get(job, "attempts"), 0);
			json_t *t = json_array_get(json_object_get(a, "tasks"), 0);
			if (!t)
				continue;
			json_int_t as = json_integer_value(json_object_get(a, "start_ms"));
			json_int_t ts = json_integer_value(json_object_get(t, "start_ms"));
			json_int_t te = json_integer_value(json_object_get(t, "end_ms"));
			json_int_t je = json_integer_value(json_object_get(job, "end_ms"));
			legs[0] += (double)(ts - as);
			legs[1] += (double)(te - ts);
			legs[2] += (double)(je - te);
			nlegs++;
		}
		json_t *next = json_object_get(j, "next");
		after = json_is_integer(next) ? json_integer_value(next) : 0;
		json_decref(j);
		if (!after)
			break;
	}
	for (int k = 0; k < 3 && nlegs; k++)
		legs[k] /= (double)nlegs;
	qsort(lat, (size_t)njobs, sizeof(double), cmp_double);
	double p50 = lat[njobs / 2] * 1000, p99 = lat[(int)(njobs * 0.99)] * 1000;
	json_t *out = json_pack("{s:i, s:i, s:s, s:i, s:f, s:f, s:f, s:f, s:I, s:f, s:f, s:f, s:f}",
				"jobs", njobs, "connections", nconn, "gpus_per_task", gpus,
				"errors", errors, "submit_seconds", submit_s, "submissions_per_s",
				njobs / submit_s, "submit_p50_ms", p50, "submit_p99_ms", p99,
				"completed", completed, "completed_jobs_per_s",
				finished > 0 ? njobs / (finished - start) : 0.0, "mean_launch_ms",
				legs[0], "mean_run_ms", legs[1], "mean_report_ms", legs[2]);
	char *text = json_dumps(out, JSON_INDENT(2));
	puts(text);
	free(text);
	json_decref(out);
	for (int i = 0; i < nconn; i++) {
		curl_easy_cleanup(slots[i].easy);
		strbuf_release(&slots[i].resp);
	}
	curl_multi_cleanup(m);
	curl_slist_free_all(h);
	free(slots);
	free(lat);
	free(auth);
	free(submit_url);
	free(body);
	free(active_url);
	free(completed_url);
	curl_global_cleanup();
	return errors || completed != njobs || finished == 0 ? 1 : 0;
}
