import java.nio.file.Path;
import org.shmkv.FloatList;
import org.shmkv.Shmkv;
import org.shmkv.Value;

public class FirstRead {
    public static void main(String[] args) {
        try (Shmkv db = Shmkv.open(Path.of(args[0]))) {            // checksums checked
            String name = db.getString("user:1:name");             // null when missing
            long age = db.getLong("user:1:age");                   // NotFound when missing
            FloatList emb = db.getFloatList("user:1:embedding");   // zero-copy, read-only
            System.out.println(name + ", " + age + ", " + emb.get(1));
            for (Value v : db)                                     // every entry, image order
                System.out.println(new String(v.key()) + ": " + v.type());
        }
    }
}
