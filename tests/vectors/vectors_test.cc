// vectors_test: the C reader over every conformance vector of manifest.json
// (tests/vectors/README.md): the open and verify verdicts (format 1 files
// refused, naming the upgrade command), the complete contents of each
// accepted image by the all-records iteration (with each entry's expiry), by
// the live iteration (expired entries absent), by shmkv_get, by the typed
// getters and by shmkv_get_batch, and the listed lookups and batches; for a
// delta vector (manifest 3), its tombstones among its records, and its
// base read through it (shmkv_delta_set): the verdict, then the same checks.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include <dirent.h>

#include <gtest/gtest.h>
#include <jansson.h>

#include <shmkv.h>

#include "vec_util.h"

namespace {

using vec::dir;
using vec::unhex;

const char *s_of(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

class Vectors : public ::testing::Test {
protected:
	void SetUp() override
	{
		json_error_t e;
		m_ = json_load_file((dir() + "/manifest.json").c_str(), JSON_ALLOW_NUL, &e);
		ASSERT_NE(m_, nullptr) << dir() << "/manifest.json: " << e.text << " at line " << e.line;
		ASSERT_STREQ(s_of(m_, "format"), "shmkv-conformance-vectors");
		ASSERT_EQ(json_integer_value(json_object_get(m_, "manifest_version")), 3);
		ASSERT_EQ(json_integer_value(json_object_get(m_, "image_format_version")), 2);
		vs_ = json_object_get(m_, "vectors");
		ASSERT_TRUE(json_is_array(vs_));
	}
	void TearDown() override { json_decref(m_); }
	json_t *m_ = nullptr, *vs_ = nullptr;
};

// The value an OK lookup returned is the one the manifest gives (the
// contents check of check_typed, for a listed get).
void check_value(const shmkv *db, const std::string &key, json_t *g)
{
	json_t *val = json_object_get(g, "value");
	if (!val)
		return;
	shmkv_value v;
	ASSERT_EQ(shmkv_get(db, key.data(), key.size(), &v), 0);
	if (v.type == SHMKV_TYPE_STRING) {
		EXPECT_EQ(std::string((const char *)v.data, v.size),
			  std::string(json_string_value(val), json_string_length(val)));
	} else if (v.type == SHMKV_TYPE_BYTES) {
		EXPECT_EQ(std::string((const char *)v.data, v.size), unhex(json_string_value(val)));
	} else if (v.type == SHMKV_TYPE_I64) {
		EXPECT_EQ(*(const int64_t *)v.data, strtoll(json_string_value(val), nullptr, 10));
	} else if (json_is_array(val)) {
		EXPECT_EQ(v.count, json_array_size(val));
	}
}

// The typed getter of e's type returns what the manifest says.
void check_typed(const shmkv *db, const std::string &key, json_t *e, const std::string &raw)
{
	const std::string type = s_of(e, "type");
	json_t *val = json_object_get(e, "value");
	const char *k = key.data();
	size_t kl = key.size();
	if (type == "string") {
		const char *s = nullptr;
		size_t len = 0;
		ASSERT_EQ(shmkv_get_str(db, k, kl, &s, &len), 0);
		EXPECT_EQ(std::string(s, len),
			  std::string(json_string_value(val), json_string_length(val)));
		EXPECT_EQ(s[len], 0);
	} else if (type == "bytes") {
		const void *p = nullptr;
		size_t len = 0;
		ASSERT_EQ(shmkv_get_bytes(db, k, kl, &p, &len), 0);
		EXPECT_EQ(std::string((const char *)p, len), unhex(json_string_value(val)));
	} else if (type == "i64") {
		int64_t x = 0;
		ASSERT_EQ(shmkv_get_i64(db, k, kl, &x), 0);
		EXPECT_EQ(x, strtoll(json_string_value(val), nullptr, 10));
	} else if (type == "bool") {
		bool x = false;
		ASSERT_EQ(shmkv_get_bool(db, k, kl, &x), 0);
		EXPECT_EQ(x, json_is_true(val));
	} else if (type == "f64") {
		double x = 0;
		ASSERT_EQ(shmkv_get_f64(db, k, kl, &x), 0);
		EXPECT_EQ(x, json_number_value(val));
		EXPECT_EQ(std::signbit(x), std::signbit(json_number_value(val)));
	} else if (type == "f32list" || type == "f64list" || type == "i64list") {
		const void *p = nullptr;
		size_t n = 0;
		if (type == "f32list")
			ASSERT_EQ(shmkv_get_f32list(db, k, kl, (const float **)&p, &n), 0);
		else if (type == "f64list")
			ASSERT_EQ(shmkv_get_f64list(db, k, kl, (const double **)&p, &n), 0);
		else
			ASSERT_EQ(shmkv_get_i64list(db, k, kl, (const int64_t **)&p, &n), 0);
		ASSERT_EQ(n, json_array_size(val));
		EXPECT_EQ((uintptr_t)p % 8, 0u) << "lists are 8-aligned";
		for (size_t i = 0; i < n; i++) {
			json_t *x = json_array_get(val, i);
			if (type == "f32list")
				EXPECT_EQ(((const float *)p)[i], (float)json_number_value(x)) << i;
			else if (type == "f64list")
				EXPECT_EQ(((const double *)p)[i], json_number_value(x)) << i;
			else
				EXPECT_EQ(((const int64_t *)p)[i], strtoll(json_string_value(x), nullptr, 10));
		}
	} else if (type == "strlist") {
		shmkv_strlist l{};
		ASSERT_EQ(shmkv_get_strlist(db, k, kl, &l), 0);
		ASSERT_EQ(shmkv_strlist_count(&l), json_array_size(val));
		for (size_t i = 0; i < shmkv_strlist_count(&l); i++) {
			size_t len = 0;
			const char *s = shmkv_strlist_at(&l, i, &len);
			ASSERT_NE(s, nullptr) << i;
			json_t *x = json_array_get(val, i);
			EXPECT_EQ(std::string(s, len),
				  std::string(json_string_value(x), json_string_length(x)));
		}
	} else {
		ADD_FAILURE() << "unknown type " << type;
	}
	// another type's getter: SHMKV_ETYPE
	int64_t x = 0;
	if (type != "i64") {
		EXPECT_EQ(shmkv_get_i64(db, k, kl, &x), SHMKV_ETYPE);
	}
	(void)raw;
}

// The complete contents of db (an image, a delta read alone, or a base read
// through a delta): entries, in the all-records iteration's order; the live
// iteration, shmkv_get, the typed getters and one batch of every key. A
// delta's tombstone ("type": "tombstone") is a record of type
// SHMKV_TYPE_TOMBSTONE without bytes to the all-records iteration, and
// absent to everything else.
void check_entries(const shmkv *db, json_t *entries)
{
	const uint64_t now = (uint64_t)time(nullptr);
	std::vector<int> want(json_array_size(entries), 0);
	shmkv_iter it, live;
	shmkv_iter_init_all(db, &it);
	shmkv_iter_init(db, &live);
	std::vector<shmkv_key> keys;
	std::vector<std::string> key_store(json_array_size(entries));
	size_t j;
	json_t *e;
	json_array_foreach(entries, j, e) {
		const std::string key = unhex(s_of(e, "key_hex"));
		const std::string raw = unhex(s_of(e, "raw_hex"));
		SCOPED_TRACE("key " + std::string(s_of(e, "key_hex")).substr(0, 40));
		const void *k = nullptr;
		size_t kl = 0;
		shmkv_value got;
		ASSERT_EQ(shmkv_iter_next(&it, &k, &kl, &got), 0);
		EXPECT_EQ(std::string((const char *)k, kl), key) << "image order";
		key_store[j] = key;
		shmkv_value g;
		if (!strcmp(s_of(e, "type"), "tombstone")) { // no value fields, absent to a get
			EXPECT_EQ(got.type, (unsigned)SHMKV_TYPE_TOMBSTONE);
			EXPECT_EQ(got.size, 0u);
			EXPECT_EQ(shmkv_iter_expires(&it), 0u);
			EXPECT_EQ(json_object_get(e, "raw_hex"), nullptr);
			EXPECT_EQ(json_object_get(e, "value"), nullptr);
			want[j] = SHMKV_ENOTFOUND;
			EXPECT_EQ(shmkv_get(db, key.data(), key.size(), &g), SHMKV_ENOTFOUND);
			continue;
		}
		EXPECT_STREQ(shmkv_type_name(got.type), s_of(e, "type"));
		EXPECT_EQ(got.shared != 0, json_is_true(json_object_get(e, "shared")));
		EXPECT_EQ(std::string((const char *)got.data, got.size), raw);
		EXPECT_EQ(got.count, (size_t)json_integer_value(json_object_get(e, "count")));
		const uint64_t exp = (uint64_t)json_integer_value(json_object_get(e, "expires"));
		EXPECT_EQ(shmkv_iter_expires(&it), exp);
		EXPECT_EQ(json_is_true(json_object_get(e, "expired")), exp && now >= exp);
		if (exp && now >= exp) { // expired: the all-records iteration lists it, nothing else
			want[j] = SHMKV_ENOTFOUND;
			EXPECT_EQ(shmkv_get(db, key.data(), key.size(), &g), SHMKV_ENOTFOUND);
			continue;
		}
		const void *lk = nullptr;
		size_t lkl = 0;
		ASSERT_EQ(shmkv_iter_next(&live, &lk, &lkl, &g), 0);
		EXPECT_EQ(std::string((const char *)lk, lkl), key) << "live iteration";
		ASSERT_EQ(shmkv_get(db, key.data(), key.size(), &g), 0);
		EXPECT_EQ(g.data, got.data);
		EXPECT_EQ(g.size, got.size);
		EXPECT_EQ(g.type, got.type);
		check_typed(db, key, e, raw);
	}
	const void *k = nullptr;
	size_t kl = 0;
	shmkv_value got;
	EXPECT_EQ(shmkv_iter_next(&it, &k, &kl, &got), SHMKV_EEND);
	EXPECT_EQ(shmkv_iter_next(&live, &k, &kl, &got), SHMKV_EEND);
	for (const std::string &s : key_store)
		keys.push_back({s.data(), s.size()});
	std::vector<shmkv_value> vals(keys.size());
	std::vector<int> errs(keys.size(), 1);
	size_t found = (size_t)std::count(want.begin(), want.end(), 0);
	EXPECT_EQ(shmkv_get_batch(db, keys.data(), keys.size(), vals.data(), errs.data()), found);
	for (size_t n = 0; n < keys.size(); n++)
		EXPECT_EQ(errs[n], want[n]) << n;
}

// The listed lookups (shmkv_get, shmkv_get_diag, a batch of one) and
// batches of a vector, or of its "delta" field, on db.
void check_lookups(const shmkv *db, json_t *v)
{
	json_t *gets = json_object_get(v, "gets");
	size_t j;
	json_t *g;
	json_array_foreach(gets, j, g) {
		const std::string key = unhex(s_of(g, "key_hex"));
		shmkv_value val;
		int r = shmkv_get(db, key.data(), key.size(), &val);
		EXPECT_STREQ(shmkv_errname(r), s_of(g, "result")) << "get " << key;
		char gwhy[256] = "";
		EXPECT_EQ(shmkv_get_diag(db, key.data(), key.size(), &val, gwhy, sizeof gwhy), r)
			<< gwhy;
		shmkv_key bk{key.data(), key.size()};
		int berr = 1;
		shmkv_get_batch(db, &bk, 1, &val, &berr);
		EXPECT_EQ(berr, r) << "batch get " << key;
		if (r == 0)
			check_value(db, key, g);
	}
	json_t *batches = json_object_get(v, "batches");
	json_t *bt;
	json_array_foreach(batches, j, bt) {
		json_t *keys = json_object_get(bt, "keys_hex"), *results = json_object_get(bt, "results");
		ASSERT_EQ(json_array_size(keys), json_array_size(results));
		std::vector<std::string> ks;
		for (size_t n = 0; n < json_array_size(keys); n++)
			ks.push_back(unhex(json_string_value(json_array_get(keys, n))));
		std::vector<shmkv_key> bk;
		for (const std::string &k : ks)
			bk.push_back({k.data(), k.size()});
		std::vector<shmkv_value> vals(ks.size());
		std::vector<int> errs(ks.size(), 1);
		shmkv_get_batch(db, bk.data(), bk.size(), vals.data(), errs.data());
		for (size_t n = 0; n < ks.size(); n++)
			EXPECT_STREQ(shmkv_errname(errs[n]), json_string_value(json_array_get(results, n)))
				<< "batch " << j << " key " << n;
	}
}

// A vector's "delta" (manifest 3): its base read through the vector's image
// (shmkv_delta_set's verdict, FORMAT.md §19.4), then what the base holds so.
void check_through(const shmkv *delta, json_t *d)
{
	const std::string base = dir() + "/" + s_of(d, "base");
	SCOPED_TRACE("read through it: " + base);
	shmkv *db = nullptr;
	ASSERT_EQ(shmkv_open_file(base.c_str(), 0, &db), 0) << base;
	char why[512] = "";
	int err = shmkv_delta_set(db, delta, why, sizeof why);
	EXPECT_STREQ(shmkv_errname(err), s_of(d, "stack")) << why;
	if (err) {
		EXPECT_NE(strstr(why, "delta"), nullptr) << why;
	} else {
		if (json_t *entries = json_object_get(d, "entries"))
			check_entries(db, entries);
		check_lookups(db, d);
		EXPECT_EQ(shmkv_delta_set(db, nullptr, why, sizeof why), 0) << why;
	}
	shmkv_close(db);
}

TEST_F(Vectors, EveryVectorGetsItsVerdictAndContents)
{
	ASSERT_GT(json_array_size(vs_), 40u);
	size_t i, deltas = 0;
	json_t *v;
	json_array_foreach(vs_, i, v) {
		const std::string name = s_of(v, "name");
		SCOPED_TRACE("vector " + name);
		const json_int_t format = json_integer_value(json_object_get(v, "format"));
		const std::string path = dir() + "/" + s_of(v, "file");
		const std::string open = s_of(v, "open"), verify = s_of(v, "verify");
		shmkv *db = nullptr;
		char why[512] = "";
		int err = shmkv_open_file_diag(path.c_str(), 0, &db, why, sizeof why);
		EXPECT_STREQ(shmkv_errname(err), open.c_str()) << why;
		// the deep open is open, then verify
		shmkv *deep = nullptr;
		int derr = shmkv_open_file(path.c_str(), SHMKV_OPEN_DEEP, &deep);
		shmkv_close(deep);
		if (format == 1) { // retired: refused, and the message says how to convert it
			EXPECT_NE(strstr(why, "shmctl image upgrade"), nullptr) << why;
		}
		if (err) {
			EXPECT_EQ(verify, "-");
			EXPECT_EQ(derr, err);
			EXPECT_EQ(json_object_get(v, "delta"), nullptr) << "a delta field on a refused image";
			continue;
		}
		EXPECT_EQ(format, 2);
		int verr = shmkv_verify(db, why, sizeof why);
		EXPECT_STREQ(shmkv_errname(verr), verify.c_str()) << why;
		EXPECT_EQ(derr, verr);

		if (json_t *entries = json_object_get(v, "entries")) {
			EXPECT_EQ(shmkv_header(db)->format_version, 2u);
			EXPECT_EQ(shmkv_header(db)->entry_count, json_array_size(entries));
			check_entries(db, entries);
		}
		check_lookups(db, v);
		if (json_t *d = json_object_get(v, "delta")) {
			deltas++;
			check_through(db, d);
		}
		shmkv_close(db);
	}
	EXPECT_GE(deltas, 8u) << "delta vectors read through";
}

// The manifest names each file once, and every .img file (format 1's in v1/) is in it.
TEST_F(Vectors, ManifestNamesEveryFileOnce)
{
	std::vector<std::string> names;
	{
		size_t i;
		json_t *v;
		json_array_foreach(vs_, i, v) {
			std::string f = s_of(v, "file");
			for (const std::string &n : names)
				EXPECT_NE(n, f);
			names.push_back(f);
			FILE *fp = fopen((dir() + "/" + f).c_str(), "rb");
			EXPECT_NE(fp, nullptr) << f;
			if (fp)
				fclose(fp);
		}
	}
	for (const std::string sub : {"", "v1/"}) {
		DIR *d = opendir((dir() + "/" + sub).c_str());
		ASSERT_NE(d, nullptr) << sub;
		while (struct dirent *e = readdir(d)) {
			std::string n = sub + e->d_name;
			if (n.size() > 4 && n.compare(n.size() - 4, 4, ".img") == 0) {
				EXPECT_NE(std::find(names.begin(), names.end(), n), names.end())
					<< n << " is not in the manifest";
			}
		}
		closedir(d);
	}
}

} // namespace
