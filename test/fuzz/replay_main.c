/*
 * replay_main.c — runs a fuzz target over saved inputs without libFuzzer, so every
 * compiler and the normal test suite exercise each decoder on its seed corpus and on
 * every crash input we ever fixed.
 *
 * Usage: replay_<name> DIR_OR_FILE...  Each regular file is one input. Fails when no input
 * at all was found, so a corpus that went missing is noticed instead of passing silently.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Returns 1 if path was a file that ran, 0 if it is not a regular file, -1 on error. */
static int run_file(const char *path)
{
	struct stat st;
	uint8_t *buf;
	FILE *f;
	int rc = -1;

	if (stat(path, &st) != 0) {
		perror(path);
		return -1;
	}
	if (!S_ISREG(st.st_mode))
		return 0;
	/* One extra byte so an empty file still has a valid, distinct buffer. */
	buf = malloc((size_t)st.st_size + 1);
	if (buf == NULL)
		return -1;
	f = fopen(path, "rb");
	if (f == NULL) {
		perror(path);
		goto out_free;
	}
	if (fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		fprintf(stderr, "%s: short read\n", path);
		goto out_close;
	}
	LLVMFuzzerTestOneInput(buf, (size_t)st.st_size);
	rc = 1;
out_close:
	fclose(f);
out_free:
	free(buf);
	return rc;
}

static int run_dir(const char *dir, unsigned *count)
{
	struct dirent *e;
	DIR *d = opendir(dir);
	int rc = 0;

	if (d == NULL) {
		perror(dir);
		return -1;
	}
	while ((e = readdir(d)) != NULL) {
		char path[4096];
		int r;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		r = run_file(path);
		if (r < 0) {
			rc = -1;
			break;
		}
		*count += (unsigned)r;
	}
	closedir(d);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned count = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;
		int r;

		if (stat(argv[i], &st) != 0) {
			perror(argv[i]);
			return 1;
		}
		if (S_ISDIR(st.st_mode)) {
			if (run_dir(argv[i], &count) < 0)
				return 1;
		} else {
			r = run_file(argv[i]);
			if (r < 0)
				return 1;
			count += (unsigned)r;
		}
	}
	if (count == 0) {
		fprintf(stderr, "%s: no inputs found (corpus missing?)\n", argv[0]);
		return 1;
	}
	printf("%s: %u inputs ran\n", argv[0], count);
	return 0;
}
