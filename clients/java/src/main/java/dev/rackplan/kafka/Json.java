package dev.rackplan.kafka;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * A small JSON reader and canonical writer, so the jar has no runtime dependency.
 *
 * <p>Why not Jackson: this jar goes onto the brokers' classpath (the server-side assignor) and into
 * applications next to their own Jackson; a dependency of ours would have to match both. Plan and
 * registration records are small documents, which a 200-line parser reads fast enough. Objects are
 * {@code Map<String,Object>} (insertion order), arrays {@code List<Object>}, numbers {@code Long}
 * when integral else {@code Double}, plus {@code String}, {@code Boolean} and {@code null}.
 *
 * <p>{@link #canonical} writes what Python's {@code json.dumps(doc, sort_keys=True,
 * separators=(",", ":"), ensure_ascii=False)} writes for the same value (strings, integers, lists,
 * maps, null), which is how the agent computes fingerprints.
 */
public final class Json {
  private Json() {}

  /** The input is not JSON; the message says where. */
  public static final class ParseException extends Exception {
    ParseException(String msg) {
      super(msg);
    }
  }

  public static Object parse(String text) throws ParseException {
    Json.Reader r = new Json.Reader(text);
    r.ws();
    Object v = r.value(0);
    r.ws();
    if (r.i != text.length()) throw new ParseException("trailing characters at offset " + r.i);
    return v;
  }

  private static final class Reader {
    final String s;
    int i;

    Reader(String s) {
      this.s = s;
    }

    ParseException err(String what) {
      return new ParseException(what + " at offset " + i);
    }

    void ws() {
      while (i < s.length()) {
        char c = s.charAt(i);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') i++;
        else break;
      }
    }

    Object value(int depth) throws ParseException {
      if (depth > 64) throw err("nesting deeper than 64");
      if (i >= s.length()) throw err("unexpected end");
      char c = s.charAt(i);
      switch (c) {
        case '{':
          return object(depth);
        case '[':
          return array(depth);
        case '"':
          return string();
        case 't':
          return literal("true", Boolean.TRUE);
        case 'f':
          return literal("false", Boolean.FALSE);
        case 'n':
          return literal("null", null);
        default:
          if (c == '-' || (c >= '0' && c <= '9')) return number();
          throw err("unexpected character '" + c + "'");
      }
    }

    Object literal(String word, Object v) throws ParseException {
      if (!s.startsWith(word, i)) throw err("bad literal");
      i += word.length();
      return v;
    }

    Map<String, Object> object(int depth) throws ParseException {
      Map<String, Object> m = new LinkedHashMap<>();
      i++;
      ws();
      if (i < s.length() && s.charAt(i) == '}') {
        i++;
        return m;
      }
      while (true) {
        ws();
        if (i >= s.length() || s.charAt(i) != '"') throw err("expected a key");
        String k = string();
        ws();
        if (i >= s.length() || s.charAt(i) != ':') throw err("expected ':'");
        i++;
        ws();
        m.put(k, value(depth + 1));
        ws();
        if (i >= s.length()) throw err("unexpected end");
        char c = s.charAt(i++);
        if (c == '}') return m;
        if (c != ',') throw err("expected ',' or '}'");
      }
    }

    List<Object> array(int depth) throws ParseException {
      List<Object> a = new ArrayList<>();
      i++;
      ws();
      if (i < s.length() && s.charAt(i) == ']') {
        i++;
        return a;
      }
      while (true) {
        ws();
        a.add(value(depth + 1));
        ws();
        if (i >= s.length()) throw err("unexpected end");
        char c = s.charAt(i++);
        if (c == ']') return a;
        if (c != ',') throw err("expected ',' or ']'");
      }
    }

    String string() throws ParseException {
      StringBuilder b = new StringBuilder();
      i++;
      while (true) {
        if (i >= s.length()) throw err("unterminated string");
        char c = s.charAt(i++);
        if (c == '"') return b.toString();
        if (c < 0x20) throw err("control character in string");
        if (c != '\\') {
          b.append(c);
          continue;
        }
        if (i >= s.length()) throw err("unterminated escape");
        char e = s.charAt(i++);
        switch (e) {
          case '"': b.append('"'); break;
          case '\\': b.append('\\'); break;
          case '/': b.append('/'); break;
          case 'b': b.append('\b'); break;
          case 'f': b.append('\f'); break;
          case 'n': b.append('\n'); break;
          case 'r': b.append('\r'); break;
          case 't': b.append('\t'); break;
          case 'u':
            if (i + 4 > s.length()) throw err("bad \\u escape");
            try {
              b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
            } catch (NumberFormatException x) {
              throw err("bad \\u escape");
            }
            i += 4;
            break;
          default:
            throw err("bad escape");
        }
      }
    }

    /**
     * A number of JSON's grammar ({@code -? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)?}: no leading
     * zeros, no bare dot), finite: one beyond a double's range (1e999) is refused, as the agent refuses
     * the infinity Python's parser makes of it. Integral ones beyond a long are doubles.
     */
    Object number() throws ParseException {
      int start = i;
      if (s.charAt(i) == '-') i++;
      if (i < s.length() && s.charAt(i) == '0') i++;
      else if (digits() == 0) throw err("bad number");
      boolean integral = true;
      if (i < s.length() && s.charAt(i) == '.') {
        i++;
        if (digits() == 0) throw err("bad number: no digit after '.'");
        integral = false;
      }
      if (i < s.length() && (s.charAt(i) == 'e' || s.charAt(i) == 'E')) {
        i++;
        if (i < s.length() && (s.charAt(i) == '+' || s.charAt(i) == '-')) i++;
        if (digits() == 0) throw err("bad number: no digit in the exponent");
        integral = false;
      }
      if (i < s.length() && s.charAt(i) >= '0' && s.charAt(i) <= '9') throw err("bad number: leading zero");
      String t = s.substring(start, i);
      if (integral) {
        try {
          return Long.parseLong(t);
        } catch (NumberFormatException big) {
          // beyond a long: a double, below
        }
      }
      double d = Double.parseDouble(t);
      if (Double.isInfinite(d)) throw err("number " + (t.length() > 40 ? t.substring(0, 40) + "..." : t) + " is not finite");
      return d;
    }

    /** Skips decimal digits; how many. */
    private int digits() {
      int from = i;
      while (i < s.length() && s.charAt(i) >= '0' && s.charAt(i) <= '9') i++;
      return i - from;
    }
  }

  /** Canonical JSON: keys sorted, no spaces, non-ASCII kept (Python's sort_keys / compact separators). */
  public static String canonical(Object v) {
    StringBuilder b = new StringBuilder();
    write(b, v, true, false);
    return b.toString();
  }

  /**
   * The same with DEL and non-ASCII characters escaped (Python's default ensure_ascii=True escapes every
   * character from 0x7f up): what signatures cover.
   */
  public static String canonicalAscii(Object v) {
    StringBuilder b = new StringBuilder();
    write(b, v, true, true);
    return b.toString();
  }

  /** JSON in the map's own key order (records this jar publishes). */
  public static String write(Object v) {
    StringBuilder b = new StringBuilder();
    write(b, v, false, false);
    return b.toString();
  }

  private static void write(StringBuilder b, Object v, boolean sorted, boolean ascii) {
    if (v == null) {
      b.append("null");
    } else if (v instanceof String) {
      quote(b, (String) v, ascii);
    } else if (v instanceof Boolean || v instanceof Long || v instanceof Integer) {
      b.append(v);
    } else if (v instanceof Number) {
      b.append(v.toString());
    } else if (v instanceof Map) {
      Map<?, ?> m = (Map<?, ?>) v;
      Iterable<? extends Map.Entry<?, ?>> entries =
          sorted ? new TreeMap<Object, Object>(m).entrySet() : m.entrySet();
      b.append('{');
      boolean first = true;
      for (Map.Entry<?, ?> e : entries) {
        if (!first) b.append(',');
        first = false;
        quote(b, String.valueOf(e.getKey()), ascii);
        b.append(':');
        write(b, e.getValue(), sorted, ascii);
      }
      b.append('}');
    } else if (v instanceof Iterable) {
      b.append('[');
      boolean first = true;
      for (Object o : (Iterable<?>) v) {
        if (!first) b.append(',');
        first = false;
        write(b, o, sorted, ascii);
      }
      b.append(']');
    } else {
      throw new IllegalArgumentException("not a JSON value: " + v.getClass().getName());
    }
  }

  private static void quote(StringBuilder b, String s, boolean ascii) {
    b.append('"');
    for (int k = 0; k < s.length(); k++) {
      char c = s.charAt(k);
      switch (c) {
        case '"': b.append("\\\""); break;
        case '\\': b.append("\\\\"); break;
        case '\n': b.append("\\n"); break;
        case '\r': b.append("\\r"); break;
        case '\t': b.append("\\t"); break;
        case '\b': b.append("\\b"); break;
        case '\f': b.append("\\f"); break;
        default:
          if (c < 0x20 || (ascii && c >= 0x7f)) b.append(String.format("\\u%04x", (int) c));
          else b.append(c);
      }
    }
    b.append('"');
  }
}
