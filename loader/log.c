/* log.c - stderr event lines and sd_notify. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

static int to_journal;

void log_init(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	if (js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &st) == 0 &&
	    (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino)
		to_journal = 1;
}

/* Copies the formatted message into out (room: cap bytes) with every control
 * byte escaped (\n, \r, \t, \xNN): names and messages come from outside
 * (spool file names, images, socket peers), and a raw newline in one would
 * forge a second log line. Returns the bytes written. */
static size_t escape_into(char *out, size_t cap, const char *in)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
		unsigned char c = *p;
		char esc = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : 0;
		size_t need = c >= 0x20 && c != 0x7f ? 1 : esc ? 2 : 4;
		if (o + need > cap)
			break;
		if (need == 1) {
			out[o++] = (char)c;
		} else {
			out[o++] = '\\';
			if (esc) {
				out[o++] = esc;
			} else {
				out[o++] = 'x';
				out[o++] = hex[c >> 4];
				out[o++] = hex[c & 15];
			}
		}
	}
	return o;
}

static void vlog(int prio, const char *fmt, va_list ap)
{
	char msg[2048], line[2048];
	size_t n = 0;
	if (to_journal)
		n = (size_t)snprintf(line, sizeof line, "<%d>", prio);
	else if (prio <= 4)
		n = (size_t)snprintf(line, sizeof line, "%s", prio <= 3 ? "error: " : "warning: ");
	if (vsnprintf(msg, sizeof msg, fmt, ap) < 0)
		return;
	n += escape_into(line + n, sizeof line - n - 1, msg);
	line[n++] = '\n';
	/* one write per line: lines of the two threads never interleave */
	ssize_t w = write(STDERR_FILENO, line, n);
	(void)w;
}

void log_info(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(6, fmt, ap);
	va_end(ap);
}

void log_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(4, fmt, ap);
	va_end(ap);
}

void log_err(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(3, fmt, ap);
	va_end(ap);
}

void notify_status(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	int n = snprintf(msg, sizeof msg, "STATUS=");
	vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
	va_end(ap);
	sd_notify(0, msg);
}

void notify_raw(const char *state)
{
	sd_notify(0, state);
}

const char *log_quote(char *buf, size_t len, const char *s)
{
	size_t o = 0;
	if (len < 3) {
		if (len)
			buf[0] = 0;
		return buf;
	}
	buf[o++] = '"';
	for (; *s && o + 3 < len; s++) {
		if (*s == '"' || *s == '\\') {
			buf[o++] = '\\';
			buf[o++] = *s;
		} else if (*s == '\n') {
			buf[o++] = '\\';
			buf[o++] = 'n';
		} else {
			buf[o++] = *s;
		}
	}
	buf[o++] = '"';
	buf[o] = 0;
	return buf;
}
