/* Private to src/cli. */
#pragma once

#include <jansson.h>

#include "cli.h"
#include "model/model.h"

struct client {
	char *url;
	char *token;
};

int client_init(struct client *c, const char *server, const char *token, const char *token_file,
		struct tk_error *err);
void client_release(struct client *c);
/* Calls the API. On a 2xx answer *ret is its JSON (caller owns it); on an
 * error answer the server's message is in err. *ret_status gets the HTTP
 * status (0 when the server was not reached). */
int client_call(struct client *c, const char *method, const char *path, json_t *body,
		long timeout_ms, json_t **ret, long *ret_status, struct tk_error *err);
