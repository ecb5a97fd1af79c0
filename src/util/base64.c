/*
 * Base64 (RFC 4648, with padding): bytes that may not be UTF-8, such as a
 * task's output, inside JSON strings.
 */
#include "util.h"

#include <errno.h>
#include <string.h>

static const char b64_alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *tk_base64_encode(const void *data, size_t len)
{
	const unsigned char *p = data;
	size_t out_len = (len + 2) / 3 * 4;
	char *out = xmalloc(out_len + 1), *o = out;
	size_t i = 0;
	for (; i + 2 < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		*o++ = b64_alphabet[v >> 18 & 63];
		*o++ = b64_alphabet[v >> 12 & 63];
		*o++ = b64_alphabet[v >> 6 & 63];
		*o++ = b64_alphabet[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0);
		*o++ = b64_alphabet[v >> 18 & 63];
		*o++ = b64_alphabet[v >> 12 & 63];
		*o++ = i + 1 < len ? b64_alphabet[v >> 6 & 63] : '=';
		*o++ = '=';
	}
	*o = '\0';
	return out;
}

static int b64_value(char c)
{
	const char *p = c ? strchr(b64_alphabet, c) : NULL;
	return p ? (int)(p - b64_alphabet) : -1;
}

int tk_base64_decode(const char *text, void **ret, size_t *ret_len)
{
	size_t n = strlen(text);
	if (n % 4)
		return -EINVAL;
	unsigned char *out = xmalloc(n / 4 * 3 + 1);
	size_t k = 0;
	for (size_t i = 0; i < n; i += 4) {
		int v[4];
		int pad = 0;
		for (int j = 0; j < 4; j++) {
			char c = text[i + j];
			if (c == '=' && i + 4 == n && j >= 2) {
				v[j] = 0;
				pad++;
				continue;
			}
			if (pad || (v[j] = b64_value(c)) < 0) {
				free(out);
				return -EINVAL;
			}
		}
		uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
			     (uint32_t)v[3];
		out[k++] = (unsigned char)(x >> 16);
		if (pad < 2)
			out[k++] = (unsigned char)(x >> 8 & 255);
		if (pad < 1)
			out[k++] = (unsigned char)(x & 255);
	}
	*ret = out;
	*ret_len = k;
	return 0;
}
