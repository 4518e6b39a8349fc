// The terminal progress bar (src/cli/progress.hpp) on a clock the test
// drives: what is drawn, when, and the rate and ETA of each stage, including
// two stages reported alternately by passes that run side by side.
#include "support/helpers.hpp"

#include "cli/progress.hpp"

#include <chrono>
#include <sstream>
#include <string>
#include <vector>

using namespace sanpath;
using cli::ProgressBar;
using namespace std::chrono_literals;

namespace {

/// The lines drawn so far: each draw is "\r\033[K" followed by the line.
std::vector<std::string> drawn_lines(const std::string& out) {
  std::vector<std::string> lines;
  const std::string erase = "\r\033[K";
  std::size_t at = out.find(erase);
  while (at != std::string::npos) {
    const std::size_t next = out.find(erase, at + erase.size());
    lines.push_back(out.substr(at + erase.size(), next == std::string::npos ? std::string::npos : next - at - erase.size()));
    at = next;
  }
  return lines;
}

}  // namespace

TEST_CASE("progress_line: bar, count, rate and ETA, fitted to the width") {
  CHECK(cli::progress_line({"pass", 0, 12}, 0.0, 80) == "sanpath: pass [--------------------] 0/12");
  // 3 of 12 in 1.5 s: 2 per second, 9 left, 4.5 s → 0:05 (rounded).
  CHECK(cli::progress_line({"pass", 3, 12}, 1.5, 80) == "sanpath: pass [#####---------------] 3/12 2.0/s ETA 0:05");
  CHECK(cli::progress_line({"pass", 12, 12}, 6.0, 80) == "sanpath: pass [####################] 12/12 2.0/s 0:06");
  const std::string long_stage(100, 'x');
  const std::string line = cli::progress_line({long_stage, 3, 12}, 1.5, 70);
  CHECK(line.size() - std::string("…").size() + 1 == 69);  // width − 1 columns; "…" is 3 bytes, 1 column
  CHECK(line.find("… [#####") != std::string::npos);
  CHECK(line.substr(line.size() - 19) == "3/12 2.0/s ETA 0:05");
  CHECK(cli::format_duration(3723) == "1:02:03");
  CHECK(cli::format_duration(-1) == "?");
}

TEST_CASE("ProgressBar: redraws at most every 100 ms within a stage, always its last unit") {
  std::ostringstream out;
  {
    ProgressBar bar(out, 80);
    const auto t0 = ProgressBar::Clock::time_point{} + 1h;
    bar.update({"pass", 0, 4}, t0);
    bar.update({"pass", 1, 4}, t0 + 50ms);   // too soon: not drawn
    bar.update({"pass", 2, 4}, t0 + 200ms);  // drawn: 2 in 0.2 s, 2 left
    bar.update({"pass", 3, 4}, t0 + 250ms);  // too soon
    bar.update({"pass", 4, 4}, t0 + 260ms);  // the last unit: drawn
  }
  const std::vector<std::string> lines = drawn_lines(out.str());
  REQUIRE(lines.size() == 4);  // three draws and the erase at the end
  CHECK(lines[0] == "sanpath: pass [--------------------] 0/4");
  CHECK(lines[1] == "sanpath: pass [##########----------] 2/4 10.0/s ETA 0:00");
  CHECK(lines[2] == "sanpath: pass [####################] 4/4 15.4/s 0:00");
  CHECK(lines[3].empty());
}

TEST_CASE("ProgressBar: stages reported alternately keep their own rate and ETA") {
  // The centred pass and its confirming run report from two threads, one
  // step each in turn; each stage's time counts from its own start.
  std::ostringstream out;
  ProgressBar bar(out, 120);
  const auto t0 = ProgressBar::Clock::time_point{} + 1h;
  bar.update({"working", 0, 10}, t0);
  bar.update({"confirming", 0, 10}, t0 + 1s);
  bar.update({"working", 2, 10}, t0 + 4s);      // 2 in 4 s: 0.5/s, 8 left: 16 s
  bar.update({"confirming", 1, 10}, t0 + 5s);   // 1 in 4 s: 0.25/s, 9 left: 36 s
  bar.update({"working", 3, 10}, t0 + 5s + 10ms);  // another stage than the one drawn: drawn at once
  const std::vector<std::string> lines = drawn_lines(out.str());
  REQUIRE(lines.size() == 5);
  CHECK(lines[2] == "sanpath: working [####----------------] 2/10 0.50/s ETA 0:16");
  CHECK(lines[3] == "sanpath: confirming [##------------------] 1/10 0.25/s ETA 0:36");
  CHECK(lines[4].find("3/10 0.60/s ETA 0:12") != std::string::npos);
  // A stage name seen again from its step 0 starts again.
  bar.update({"working", 0, 10}, t0 + 100s);
  bar.update({"working", 5, 10}, t0 + 110s);
  CHECK(drawn_lines(out.str()).back().find("5/10 0.50/s ETA 0:10") != std::string::npos);
}
