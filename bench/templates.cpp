// templates.cpp: a templated C++ file as programs have them (containers, smart pointers,
// algorithms, std::function, std::variant, std::regex, streams): the clang++ workload of
// bench/unwind.sh, whose stacks are deep (issue 47: the default depth).
#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

template <typename K, typename V> struct Cache {
    std::unordered_map<K, std::shared_ptr<V>> items;
    std::function<V(const K &)> make;
    const V &get(const K &k)
    {
        auto it = items.find(k);
        if (it == items.end())
            it = items.emplace(k, std::make_shared<V>(make(k))).first;
        return *it->second;
    }
};

using Value = std::variant<long, double, std::string, std::vector<int>>;

struct Printer {
    std::ostream &os;
    void operator()(long v) const { os << v; }
    void operator()(double v) const { os << v; }
    void operator()(const std::string &v) const { os << v; }
    void operator()(const std::vector<int> &v) const { os << v.size(); }
};

int main(int argc, char **argv)
{
    Cache<std::string, std::vector<Value>> c{{}, [](const std::string &k) {
                                                 return std::vector<Value>{long(k.size()), 1.5, k};
                                             }};
    std::map<std::string, int> counts;
    std::regex word("[a-z]+");
    for (int i = 1; i < argc; i++) {
        std::string s = argv[i];
        for (std::sregex_iterator it(s.begin(), s.end(), word), end; it != end; ++it)
            counts[it->str()]++;
        for (const Value &v : c.get(s))
            std::visit(Printer{std::cout}, v);
    }
    std::vector<std::pair<std::string, int>> v(counts.begin(), counts.end());
    std::sort(v.begin(), v.end(), [](auto &a, auto &b) { return a.second > b.second; });
    std::ostringstream os;
    for (auto &[k, n] : v)
        os << k << ' ' << n << '\n';
    std::cout << os.str();
    return 0;
}
