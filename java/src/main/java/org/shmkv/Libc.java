package org.shmkv;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.invoke.MethodHandle;

/**
 * The libc functions the reader calls through the FFM linker (madvise for
 * {@link Advice}, getcpu for {@link Numa}). A downcall handle is a
 * restricted method: without native access granted to this code
 * (--enable-native-access=ALL-UNNAMED, or the module's name on a module
 * path), the JDK would print a warning, and will refuse it in a later
 * release. So a handle exists only where native access is enabled; else
 * the caller does without.
 */
final class Libc {
	private Libc() {}

	/** libc's function name as fd describes it; null without native access, off Linux, or where it is missing. */
	@SuppressWarnings("restricted") // called only where native access is enabled
	static MethodHandle function(String name, FunctionDescriptor fd) {
		if (!Libc.class.getModule().isNativeAccessEnabled() || !"Linux".equals(System.getProperty("os.name")))
			return null;
		try {
			Linker l = Linker.nativeLinker();
			return l.defaultLookup().find(name).map(a -> l.downcallHandle(a, fd)).orElse(null);
		} catch (RuntimeException e) { // no linker for this platform, or native access refused after all
			return null;
		}
	}
}
