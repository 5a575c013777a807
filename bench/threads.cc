// threads.cc - thread scaling: T threads (1..--threads-max) share one built
// system and split one uniform stream into T contiguous parts. Lookups per
// second = stream length / wall time from the release of the threads to the
// end of the last one; 3 repetitions, round-robin over systems, median kept.

#include "bench.h"

#include <sched.h>

#include <atomic>
#include <cinttypes>
#include <thread>

namespace bench {

namespace {

double run_once(const System &sys, const Stream &s, unsigned t_count)
{
	std::atomic<unsigned> ready{0};
	std::atomic<bool> go{false};
	std::vector<PassResult> res(t_count);
	std::vector<std::thread> th;
	size_t m = s.keys.size();
	for (unsigned t = 0; t < t_count; t++)
		th.emplace_back([&, t] {
			size_t b = m * t / t_count, e = m * (t + 1) / t_count;
			ready++;
			while (!go.load(std::memory_order_acquire))
				sched_yield();
			res[t] = sys.pass(s, b, e);
		});
	while (ready.load() != t_count)
		sched_yield();
	auto t0 = Clock::now();
	go.store(true, std::memory_order_release);
	for (std::thread &x : th)
		x.join();
	double secs = seconds_since(t0);
	PassResult total;
	for (const PassResult &p : res)
		total.found += p.found, total.sum += p.sum;
	if (total.found != s.hits || total.sum != s.expect)
		fail("%s with %u threads: found %" PRIu64 ", expected %" PRIu64, sys.name.c_str(),
		     t_count, total.found, s.hits);
	return (double)m / secs / 1e6;
}

} // namespace

void run_threads(const Options &o, const Dataset &d, const Stream &s,
		 const std::vector<System *> &systems, Report &r)
{
	const unsigned reps = 3;
	for (unsigned t = 1; t <= o.threads_max; t++) {
		for (System *sys : systems) {
			ThreadRecord tr;
			tr.keys = d.n;
			tr.system = sys->name;
			tr.threads = t;
			r.threads.push_back(tr);
		}
		size_t first = r.threads.size() - systems.size();
		for (unsigned rep = 0; rep < reps; rep++)
			for (size_t i = 0; i < systems.size(); i++) {
				double mops = run_once(*systems[i], s, t);
				r.threads[first + i].mops.push_back(mops);
				note("[%" PRIu64 " keys] threads %u rep %u %s %.2f M lookups/s\n", d.n, t,
				     rep + 1, systems[i]->name.c_str(), mops);
			}
	}
}

} // namespace bench
