package dev.rl.testing;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A strict parser of RFC 9651 Structured Field Lists of Items (sections 4.2.1, 4.2.3, 4.2.4-4.2.7),
 * written for these tests from the RFC's algorithms, independent of rl's renderer: no Java
 * Structured Fields library is on Maven Central here (org.greenbytes.http:sfv did not resolve).
 * Inner lists, byte sequences, dates and display strings are refused (rl never sends them).
 * Shared by the servlet and gateway test suites (each pom adds this directory as a test source).
 */
public final class StructuredFields {
    /** One list member: its bare item and its parameters, in order. */
    public record Item(Object value, Map<String, Object> params) {}

    /** A token, as opposed to a string. */
    public record Token(String text) {}

    private final String s;
    private int i;

    private StructuredFields(String s) {
        this.s = s;
    }

    public static List<Item> parseList(String field) {
        StructuredFields p = new StructuredFields(field);
        p.skip(' ');
        List<Item> out = new ArrayList<>();
        while (p.i < p.s.length()) {
            out.add(p.item());
            p.ows();
            if (p.i >= p.s.length()) {
                return out;
            }
            p.expect(',');
            p.ows();
            if (p.i >= p.s.length()) {
                throw p.fail("trailing comma");
            }
        }
        return out;
    }

    private Item item() {
        Object v = bare();
        Map<String, Object> params = new LinkedHashMap<>();
        while (i < s.length() && s.charAt(i) == ';') {
            i++;
            skip(' ');
            String k = key();
            Object pv = Boolean.TRUE;
            if (i < s.length() && s.charAt(i) == '=') {
                i++;
                pv = bare();
            }
            params.put(k, pv);
        }
        return new Item(v, params);
    }

    private Object bare() {
        if (i >= s.length()) {
            throw fail("empty item");
        }
        char c = s.charAt(i);
        if (c == '-' || (c >= '0' && c <= '9')) {
            return number();
        }
        if (c == '"') {
            return string();
        }
        if (c == '*' || Character.isLetter(c) && c < 128) {
            return token();
        }
        if (c == '?') {
            i++;
            char b = i < s.length() ? s.charAt(i++) : 'x';
            if (b == '1' || b == '0') {
                return b == '1';
            }
            throw fail("bad boolean");
        }
        throw fail("unsupported item");
    }

    private Object number() {
        int start = i;
        if (s.charAt(i) == '-') {
            i++;
        }
        int digits = 0;
        boolean decimal = false;
        while (i < s.length()) {
            char c = s.charAt(i);
            if (c >= '0' && c <= '9') {
                digits++;
                i++;
            } else if (c == '.' && !decimal) {
                if (digits > 12) {
                    throw fail("decimal too long");
                }
                decimal = true;
                i++;
            } else {
                break;
            }
            if (!decimal && digits > 15) {
                throw fail("integer too long");
            }
        }
        String text = s.substring(start, i);
        if (digits == 0 || text.endsWith(".")) {
            throw fail("bad number");
        }
        return decimal ? (Object) Double.parseDouble(text) : (Object) Long.parseLong(text);
    }

    private String string() {
        i++;
        StringBuilder b = new StringBuilder();
        while (i < s.length()) {
            char c = s.charAt(i++);
            if (c == '\\') {
                if (i >= s.length() || (s.charAt(i) != '"' && s.charAt(i) != '\\')) {
                    throw fail("bad escape");
                }
                b.append(s.charAt(i++));
            } else if (c == '"') {
                return b.toString();
            } else if (c < 0x20 || c > 0x7e) {
                throw fail("bad string character");
            } else {
                b.append(c);
            }
        }
        throw fail("unterminated string");
    }

    private Token token() {
        int start = i++;
        while (i < s.length() && (Character.isLetterOrDigit(s.charAt(i)) && s.charAt(i) < 128
                || "!#$%&'*+-.^_`|~:/".indexOf(s.charAt(i)) >= 0)) {
            i++;
        }
        return new Token(s.substring(start, i));
    }

    private String key() {
        int start = i;
        if (i >= s.length() || !(s.charAt(i) == '*' || (s.charAt(i) >= 'a' && s.charAt(i) <= 'z'))) {
            throw fail("bad key");
        }
        i++;
        while (i < s.length() && ((s.charAt(i) >= 'a' && s.charAt(i) <= 'z') || (s.charAt(i) >= '0' && s.charAt(i) <= '9')
                || "_-.*".indexOf(s.charAt(i)) >= 0)) {
            i++;
        }
        return s.substring(start, i);
    }

    private void ows() {
        while (i < s.length() && (s.charAt(i) == ' ' || s.charAt(i) == '\t')) {
            i++;
        }
    }

    private void skip(char c) {
        while (i < s.length() && s.charAt(i) == c) {
            i++;
        }
    }

    private void expect(char c) {
        if (i >= s.length() || s.charAt(i) != c) {
            throw fail("expected '" + c + "'");
        }
        i++;
    }

    private IllegalArgumentException fail(String why) {
        return new IllegalArgumentException("not a Structured Field List (" + why + " at " + i + "): " + s);
    }
}
