package dev.rl;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A minimal RESP client for the tests' own look at Redis (INFO, TIME, LRANGE, ...), independent of
 * both the library under test and Redisson. Bulk strings come back as {@code String} holding the
 * raw bytes as ISO-8859-1 characters (lossless, so binary values survive), integers as
 * {@code Long}, arrays as {@code List<Object>}; an error reply throws. Arguments are sent as UTF-8.
 */
final class TestRedis implements AutoCloseable {
    private final Socket socket;
    private final InputStream in;
    private final OutputStream out;

    TestRedis(int port) {
        try {
            socket = new Socket();
            socket.connect(new InetSocketAddress("127.0.0.1", port), 2000);
            socket.setSoTimeout(5000);
            socket.setTcpNoDelay(true);
            in = new BufferedInputStream(socket.getInputStream());
            out = socket.getOutputStream();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot connect to redis on 127.0.0.1:" + port, e);
        }
    }

    static TestRedis connect() {
        return new TestRedis(TestSupport.redisPort());
    }

    synchronized Object call(String... args) {
        try {
            ByteArrayOutputStream b = new ByteArrayOutputStream();
            b.write(("*" + args.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
            for (String a : args) {
                byte[] bytes = a.getBytes(StandardCharsets.UTF_8);
                b.write(("$" + bytes.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
                b.write(bytes);
                b.write("\r\n".getBytes(StandardCharsets.US_ASCII));
            }
            out.write(b.toByteArray());
            out.flush();
            return read();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private Object read() throws IOException {
        int type = in.read();
        String line = line();
        switch (type) {
            case '+':
                return line;
            case '-':
                throw new IllegalStateException("redis error: " + line);
            case ':':
                return Long.parseLong(line);
            case '$': {
                int n = Integer.parseInt(line);
                if (n < 0) {
                    return null;
                }
                byte[] data = in.readNBytes(n + 2);
                return new String(data, 0, n, StandardCharsets.ISO_8859_1);
            }
            case '*': {
                int n = Integer.parseInt(line);
                if (n < 0) {
                    return null;
                }
                List<Object> items = new ArrayList<>(n);
                for (int i = 0; i < n; i++) {
                    items.add(read());
                }
                return items;
            }
            default:
                throw new IOException("bad RESP type byte " + type);
        }
    }

    private String line() throws IOException {
        StringBuilder s = new StringBuilder();
        for (int c = in.read(); c != '\r'; c = in.read()) {
            if (c < 0) {
                throw new IOException("connection closed");
            }
            s.append((char) c);
        }
        in.read(); // \n
        return s.toString();
    }

    /** Redis TIME in Unix milliseconds. */
    long timeMs() {
        List<?> t = (List<?>) call("TIME");
        return Long.parseLong((String) t.get(0)) * 1000 + Long.parseLong((String) t.get(1)) / 1000;
    }

    /** INFO {@code section} as a map. */
    Map<String, String> info(String section) {
        Map<String, String> m = new HashMap<>();
        for (String l : ((String) call("INFO", section)).split("\r\n")) {
            int c = l.indexOf(':');
            if (c > 0) {
                m.put(l.substring(0, c), l.substring(c + 1));
            }
        }
        return m;
    }

    /** How many times Redis ran {@code command} (INFO commandstats). */
    long calls(String command) {
        String v = info("commandstats").get("cmdstat_" + command);
        if (v == null) {
            return 0;
        }
        for (String part : v.split(",")) {
            if (part.startsWith("calls=")) {
                return Long.parseLong(part.substring(6));
            }
        }
        return 0;
    }

    @Override
    public void close() {
        try {
            socket.close();
        } catch (IOException ignored) {
            // closing
        }
    }
}
