/* hugepages.h - the `hugepages` object (hugepages.c). */
#ifndef SHMCTL_HUGEPAGES_H
#define SHMCTL_HUGEPAGES_H

int hugepages_help(int argc, char **argv);
int do_hugepages_plan(int argc, char **argv);
int do_hugepages_reserve(int argc, char **argv);

#endif /* SHMCTL_HUGEPAGES_H */
