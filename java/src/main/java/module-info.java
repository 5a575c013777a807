/**
 * The pure-Java reader of shmkv images and of caches served by
 * shmkv-loader (lib/FORMAT.md, lib/PROTOCOL.md): {@link org.shmkv.Shmkv}
 * opens an image file or attaches to a cache; its getters and
 * {@link org.shmkv.Snapshot} read values in place through the Foreign
 * Function and Memory API. Grant it native access
 * ({@code --enable-native-access=org.shmkv}) for the huge-page advice on
 * image files.
 */
module org.shmkv {
	requires hash4j;

	exports org.shmkv;
}
