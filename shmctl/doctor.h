/* doctor.h - the `doctor` object (doctor.c). */
#ifndef SHMCTL_DOCTOR_H
#define SHMCTL_DOCTOR_H

int doctor_help(int argc, char **argv);
int do_doctor_check(int argc, char **argv);

#endif /* SHMCTL_DOCTOR_H */
