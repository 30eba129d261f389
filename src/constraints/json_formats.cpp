// String formats as regular expressions (full match over the decoded string). Dates are exact,
// leap years included (RFC 3339 full-date: February 29 only in years divisible by 4 and not by
// 100 unless by 400).
#include <string>

#include "constraints/json_schema_compiler.h"

namespace lockstep::constraints {

namespace {

#define LEAP_YEAR "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
#define MONTH_DAY                                                                   \
  "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|" \
  "02-(?:0[1-9]|1[0-9]|2[0-8]))"
#define DATE "(?:[0-9]{4}-" MONTH_DAY "|" LEAP_YEAR "-02-29)"
// RFC 3339 full-time; a leap second (:60) is accepted only at 23:59 UTC-equivalent is not checked
// by a regex, so :60 is refused.
#define TIME "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?(?:[zZ]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"

}  // namespace

const char* format_regex(const std::string& format) {
  if (format == "date") return "^" DATE "$";
  if (format == "time") return "^" TIME "$";
  if (format == "date-time") return "^" DATE "[tT]" TIME "$";
  if (format == "uuid")
    return "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
  // A practical subset of RFC 5321: dot-atom local part and a dotted domain name.
  if (format == "email")
    return "^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@"
           "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$";
  if (format == "ipv4")
    return "^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])$";
  return nullptr;
}

}  // namespace lockstep::constraints
