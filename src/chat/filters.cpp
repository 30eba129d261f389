// Jinja2's built-in filters that chat templates use, with the argument names and defaults of
// Jinja2 3.1, plus transformers' own `tojson` (json.dumps with ensure_ascii=False, indent,
// separators, sort_keys). Filters take their subject and Args and return a new Value.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>

#include "chat/builtins.h"
#include "chat/text.h"
#include "core/error.h"

namespace lockstep::chat {

namespace {

using FilterFn = std::function<Value(const Value&, const Args&)>;

const Value* opt(const Args& a, size_t i, const char* name) {
  const Value* v = a.get(i, name);
  return v && !v->is_none() ? v : nullptr;
}

bool flag(const Args& a, size_t i, const char* name) {
  const Value* v = a.get(i, name);
  return v && v->truthy();
}

// Jinja2's make_attrgetter: "a.b.0" walks items (falling back to attributes) part by part.
Value attribute_path(const Value& item, const std::string& path) {
  static const std::string dot = ".";
  Value v = item;
  for (const std::string& part : text::split(path, &dot, -1)) {
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = get_item(v, digits ? Value(int64_t(std::stoll(part))) : Value(part));
  }
  return v;
}

// Sort/min/max/unique keys: strings compare case-insensitively unless case_sensitive is set.
Value sort_key(const Value& v, const Value* attribute, bool case_sensitive) {
  Value k = attribute ? attribute_path(v, want_string(*attribute, "attribute")) : v;
  if (!case_sensitive && k.is_string()) return Value(text::lower(k.str()));
  return k;
}

// Positional arguments from index `from` on (for select/map forwarding to a test or filter).
Args rest(const Args& a, size_t from) {
  Args out;
  for (size_t i = from; i < a.positional.size(); ++i) out.positional.push_back(a.positional[i]);
  out.keywords = a.keywords;
  return out;
}

Value select(const Value& seq, const Args& a, bool attr, bool keep) {
  size_t next = 0;
  std::string attribute;
  if (attr) {
    const Value* at = a.get(next++, "attribute");
    if (!at) fail("selectattr/rejectattr need an attribute name");
    attribute = want_string(*at, "attribute");
  }
  const Value* test = a.get(next, "test");
  Args test_args = rest(a, next + 1);
  std::vector<Value> out;
  for (const Value& item : iterate(seq)) {
    const Value subject = attr ? attribute_path(item, attribute) : item;
    const bool ok = test ? apply_test(want_string(*test, "test name"), subject, test_args) : subject.truthy();
    if (ok == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value do_map(const Value& seq, const Args& a) {
  std::vector<Value> out;
  const Value* attribute = nullptr;
  for (const auto& kv : a.keywords)
    if (kv.first == "attribute") attribute = &kv.second;
  if (attribute) {
    const Value* def = nullptr;
    for (const auto& kv : a.keywords)
      if (kv.first == "default") def = &kv.second;
    for (const Value& item : iterate(seq)) {
      Value v = attribute_path(item, want_string(*attribute, "attribute"));
      out.push_back(v.is_undefined() && def ? *def : v);
    }
    return Value::list(std::move(out));
  }
  if (a.positional.empty()) fail("map() needs a filter name or attribute=");
  const std::string& f = want_string(a.positional[0], "filter name");
  Args fargs = rest(a, 1);
  for (const Value& item : iterate(seq)) out.push_back(apply_filter(f, item, fargs));
  return Value::list(std::move(out));
}

Value extreme(const Value& seq, const Args& a, bool want_max) {
  const bool cs = flag(a, 0, "case_sensitive");
  const Value* attribute = opt(a, 1, "attribute");
  std::vector<Value> items = iterate(seq);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    const Value ki = sort_key(items[i], attribute, cs), kb = sort_key(items[best], attribute, cs);
    if (want_max ? less(kb, ki) : less(ki, kb)) best = i;
  }
  return items[best];
}

Value add(const Value& x, const Value& y) {
  if (x.is_float() || y.is_float()) return Value(x.number() + y.number());
  if (x.is_number() && y.is_number()) return Value(x.integer() + y.integer());
  fail("unsupported operand types for sum: '", x.type_name(), "' and '", y.type_name(), "'");
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value indent(const Value& s, const Args& a) {
  if (!s.is_string()) fail("indent expects a string, not '", s.type_name(), "'");  // Jinja2: s += "\n"
  const Value* w = a.get(0, "width");
  std::string pad = w && w->is_string() ? w->str() : std::string(size_t(w ? std::max<int64_t>(0, want_int(*w, "width")) : 4), ' ');
  const bool first = flag(a, 1, "first"), blank = flag(a, 2, "blank");
  std::vector<std::string> lines = text::split_lines(s.to_str() + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "\n";
    if (i && (blank || !lines[i].empty())) out += pad;
    out += lines[i];
  }
  return Value(first ? pad + out : out);
}

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> f = [] {
    std::map<std::string, FilterFn> m;
    m["abs"] = [](const Value& v, const Args&) {
      if (v.is_float()) return Value(std::fabs(v.number()));
      const int64_t i = want_int(v, "abs argument");
      return Value(i < 0 ? -i : i);
    };
    m["attr"] = [](const Value& v, const Args& a) {
      const Value* n = a.get(0, "name");
      if (!n) fail("attr() needs a name");
      // Python getattr only: a dict's items are not attributes (its methods are).
      const std::string& name = want_string(*n, "attribute name");
      if (v.is_mapping()) {
        const Value m = get_attr(v, name);
        return m.is_callable() ? m : Value::undefined("'dict object' has no attribute '" + name + "'");
      }
      return get_attr(v, name);
    };
    m["capitalize"] = [](const Value& v, const Args&) { return Value(text::capitalize(v.to_str())); };
    m["length"] = [](const Value& v, const Args&) { return Value(length(v)); };
    m["count"] = m["length"];
    m["default"] = [](const Value& v, const Args& a) {
      const Value* d = a.get(0, "default_value");
      const bool boolean = flag(a, 1, "boolean");
      if (v.is_undefined() || (boolean && !v.truthy())) return d ? *d : Value("");
      return v;
    };
    m["d"] = m["default"];
    m["dictsort"] = [](const Value& v, const Args& a) {
      if (!v.is_mapping()) fail("dictsort expects a mapping, not '", v.type_name(), "'");
      const bool cs = flag(a, 0, "case_sensitive");
      const Value* by = opt(a, 1, "by");
      const bool by_value = by && want_string(*by, "by") == "value";
      const bool reverse = flag(a, 2, "reverse");
      std::vector<std::pair<Value, Value>> items = v.dict().items;
      std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
        const Value kx = sort_key(by_value ? x.second : x.first, nullptr, cs);
        const Value ky = sort_key(by_value ? y.second : y.first, nullptr, cs);
        return reverse ? less(ky, kx) : less(kx, ky);
      });
      std::vector<Value> out;
      for (auto& [k, val] : items) out.push_back(Value::list({k, val}, true));
      return Value::list(std::move(out));
    };
    m["escape"] = [](const Value& v, const Args&) { return Value(html_escape(v.to_str())); };
    m["e"] = m["escape"];
    m["first"] = [](const Value& v, const Args&) {
      std::vector<Value> items = iterate(v);
      return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
    };
    m["last"] = [](const Value& v, const Args&) {
      std::vector<Value> items = iterate(v);
      return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
    };
    m["float"] = [](const Value& v, const Args& a) {
      const Value* d = a.get(0, "default");
      if (v.is_undefined()) fail(v.undefined_hint());  // float(Undefined) raises in Jinja2
      if (v.is_number()) return Value(v.number());
      if (v.is_string()) {
        try {
          size_t used = 0;
          const std::string t = text::strip(v.str(), nullptr, true, true);
          const double x = std::stod(t, &used);
          if (used == t.size()) return Value(x);
        } catch (const std::exception&) {
        }
      }
      return d ? *d : Value(0.0);
    };
    m["int"] = [](const Value& v, const Args& a) {
      const Value* d = a.get(0, "default");
      if (v.is_undefined()) fail(v.undefined_hint());
      if (v.is_float()) return Value(int64_t(std::trunc(v.number())));
      if (v.is_number()) return Value(v.integer());
      if (v.is_string()) {
        const std::string t = text::strip(v.str(), nullptr, true, true);
        try {
          size_t used = 0;
          const long long x = std::stoll(t, &used, 10);
          if (used == t.size()) return Value(int64_t(x));
          const double f = std::stod(t, &used);
          if (used == t.size()) return Value(int64_t(std::trunc(f)));
        } catch (const std::exception&) {
        }
      }
      return d ? *d : Value(0);
    };
    m["indent"] = indent;
    m["items"] = [](const Value& v, const Args&) {
      if (v.is_undefined()) return Value::list({});
      if (!v.is_mapping()) fail("items expects a mapping, not '", v.type_name(), "'");
      return get_attr(v, "items").callable().call(Args{});
    };
    m["join"] = [](const Value& v, const Args& a) {
      const Value* sep = a.get(0, "d");
      const Value* attribute = opt(a, 1, "attribute");
      std::string out;
      bool first = true;
      for (const Value& item : iterate(v)) {
        if (!first && sep) out += sep->to_str();
        out += (attribute ? attribute_path(item, want_string(*attribute, "attribute")) : item).to_str();
        first = false;
      }
      return Value(out);
    };
    m["list"] = [](const Value& v, const Args&) { return Value::list(iterate(v)); };
    m["lower"] = [](const Value& v, const Args&) { return Value(text::lower(v.to_str())); };
    m["upper"] = [](const Value& v, const Args&) { return Value(text::upper(v.to_str())); };
    m["title"] = [](const Value& v, const Args&) {
      // Jinja2's own rule, not str.title(): words start after runs of whitespace or -({[<.
      std::string out;
      bool start = true;
      for (uint32_t cp : text::decode(v.to_str())) {
        const bool delim = text::is_space(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
        std::string one;
        text::append_utf8(one, cp);
        out += delim ? one : start ? text::upper(one) : text::lower(one);
        start = delim;
      }
      return Value(out);
    };
    m["trim"] = [](const Value& v, const Args& a) {
      const Value* chars = opt(a, 0, "chars");
      return Value(text::strip(v.to_str(), chars ? &want_string(*chars, "chars") : nullptr, true, true));
    };
    m["replace"] = [](const Value& v, const Args& a) {
      const Value* from = a.get(0, "old");
      const Value* to = a.get(1, "new");
      if (!from || !to) fail("replace needs old and new strings");
      const Value* count = opt(a, 2, "count");
      return Value(text::replace(v.to_str(), from->to_str(), to->to_str(), count ? want_int(*count, "count") : -1));
    };
    m["map"] = do_map;
    m["select"] = [](const Value& v, const Args& a) { return select(v, a, false, true); };
    m["reject"] = [](const Value& v, const Args& a) { return select(v, a, false, false); };
    m["selectattr"] = [](const Value& v, const Args& a) { return select(v, a, true, true); };
    m["rejectattr"] = [](const Value& v, const Args& a) { return select(v, a, true, false); };
    m["max"] = [](const Value& v, const Args& a) { return extreme(v, a, true); };
    m["min"] = [](const Value& v, const Args& a) { return extreme(v, a, false); };
    m["reverse"] = [](const Value& v, const Args&) {
      const Value step(-1);
      if (v.is_string()) return get_slice(v, nullptr, nullptr, &step);
      std::vector<Value> items = iterate(v);
      std::reverse(items.begin(), items.end());
      return Value::list(std::move(items));
    };
    m["round"] = [](const Value& v, const Args& a) {
      const Value* p = a.get(0, "precision");
      const Value* how = opt(a, 1, "method");
      const std::string method = how ? want_string(*how, "method") : "common";
      const double scale = std::pow(10.0, double(p ? want_int(*p, "precision") : 0));
      const double x = v.number() * scale;
      double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
      // Python's round() of an int is an int; ceil/floor give floats.
      if (!v.is_float() && method == "common") return Value(v.integer());
      const int64_t digits = p ? want_int(*p, "precision") : 0;
      if (method == "common" && digits >= 0 && digits < 300 && std::isfinite(v.number())) {
        // Python rounds the exact binary value half-to-even (round(2.675, 2) == 2.67), which is
        // what glibc's printf does; scaling by 10**n first would round 267.49999... up.
        char buf[512];
        std::snprintf(buf, sizeof buf, "%.*f", int(digits), v.number());
        return Value(std::strtod(buf, nullptr));
      }
      return Value(r / scale);
    };
    m["safe"] = [](const Value& v, const Args&) { return v; };
    m["sort"] = [](const Value& v, const Args& a) {
      const bool reverse = flag(a, 0, "reverse"), cs = flag(a, 1, "case_sensitive");
      const Value* attribute = opt(a, 2, "attribute");
      std::vector<Value> items = iterate(v);
      std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
        const Value kx = sort_key(x, attribute, cs), ky = sort_key(y, attribute, cs);
        return reverse ? less(ky, kx) : less(kx, ky);
      });
      return Value::list(std::move(items));
    };
    m["string"] = [](const Value& v, const Args&) { return Value(v.to_str()); };
    m["sum"] = [](const Value& v, const Args& a) {
      const Value* attribute = opt(a, 0, "attribute");
      const Value* start = a.get(1, "start");
      Value total = start ? *start : Value(0);
      for (const Value& item : iterate(v))
        total = add(total, attribute ? attribute_path(item, want_string(*attribute, "attribute")) : item);
      return total;
    };
    m["tojson"] = [](const Value& v, const Args& a) {
      JsonStyle style;
      style.ensure_ascii = flag(a, 0, "ensure_ascii");
      style.indent = opt(a, 1, "indent");
      if (const Value* sep = opt(a, 2, "separators")) {
        if (!sep->is_list() || sep->list().items.size() != 2) fail("separators must be a pair of strings");
        style.item_sep = want_string(sep->list().items[0], "item separator");
        style.key_sep = want_string(sep->list().items[1], "key separator");
      }
      style.sort_keys = flag(a, 3, "sort_keys");
      return Value(to_json(v, style));
    };
    m["unique"] = [](const Value& v, const Args& a) {
      const bool cs = flag(a, 0, "case_sensitive");
      const Value* attribute = opt(a, 1, "attribute");
      std::vector<Value> out, seen;
      for (const Value& item : iterate(v)) {
        const Value k = sort_key(item, attribute, cs);
        if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) continue;
        seen.push_back(k);
        out.push_back(item);
      }
      return Value::list(std::move(out));
    };
    m["wordcount"] = [](const Value& v, const Args&) {
      // len(re.findall(r"\w+", str(v))): runs of letters, digits and underscores.
      int64_t n = 0;
      bool in_word = false;
      for (uint32_t cp : text::decode(v.to_str())) {
        const bool w = cp == '_' || (cp >= '0' && cp <= '9') || ((cp | 32) >= 'a' && (cp | 32) <= 'z') ||
                       (cp >= 0xAA && !text::is_space(cp) && cp != 0xD7 && cp != 0xF7 && !(cp >= 0x2000 && cp <= 0x2BFF) &&
                        !(cp >= 0x3000 && cp <= 0x303F) && !(cp >= 0xFF00 && cp <= 0xFF0F));
        n += w && !in_word;
        in_word = w;
      }
      return Value(n);
    };
    return m;
  }();
  return f;
}

}  // namespace

bool has_filter(const std::string& name) { return filters().count(name) != 0; }

Value apply_filter(const std::string& name, const Value& subject, const Args& args) {
  const auto it = filters().find(name);
  if (it == filters().end()) fail("no filter named '", name, "'");
  return it->second(subject, args);
}

}  // namespace lockstep::chat
