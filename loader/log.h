/* log.h - one line per event on stderr (journald picks it up), and sd_notify. */
#ifndef LOADER_LOG_H
#define LOADER_LOG_H

#include <stddef.h>

/* Detects whether stderr is the journal ($JOURNAL_STREAM): then lines carry
 * a syslog priority prefix ("<3>") that journald turns into the priority. */
void log_init(void);

#if defined(__GNUC__)
#define LOG__FMT(a, b) __attribute__((format(printf, a, b)))
#else
#define LOG__FMT(a, b)
#endif

void log_info(const char *fmt, ...) LOG__FMT(1, 2);
void log_warn(const char *fmt, ...) LOG__FMT(1, 2);
void log_err(const char *fmt, ...) LOG__FMT(1, 2);

/* sd_notify STATUS=... (a no-op outside systemd). */
void notify_status(const char *fmt, ...) LOG__FMT(1, 2);
/* sd_notify with a raw state string ("READY=1", "STOPPING=1", ...). */
void notify_raw(const char *state);

/* Writes s as a double-quoted log value ("..." with \" \\ and \n escaped)
 * into buf and returns buf. */
const char *log_quote(char *buf, size_t len, const char *s);

#endif /* LOADER_LOG_H */
