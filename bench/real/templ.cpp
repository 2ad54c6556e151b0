// templ.cpp: the clang++ workload of bench/storage.sh and of issue 47's section 1 figures
// (bench/RESULTS.md): <regex>, maps and a deep template recursion, about 5M allocations.
#include <map>
#include <vector>
#include <string>
#include <regex>
#include <iostream>
#include <unordered_map>
#include <algorithm>
template <int N> struct F { static constexpr long v = N * F<N-1>::v % 1000003; };
template <> struct F<0> { static constexpr long v = 1; };
int main() {
  std::map<std::string, std::vector<int>> m;
  std::unordered_map<int, std::string> u;
  std::regex r("a+b*");
  for (int i = 0; i < 10; i++) { m[std::to_string(i)].push_back(i); u[i] = "x"; }
  std::cout << F<200>::v << std::regex_match("aab", r) << m.size() << u.size() << "\n";
}
