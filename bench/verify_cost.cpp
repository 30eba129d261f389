// Verify cost per width: time of one target forward over T = 1..8 tokens after a 100-token
// prompt (what one speculative round costs at draft width T-1), best of 30.
// Build: g++ -std=c++20 -O2 -Isrc bench/verify_cost.cpp -o build/verify_cost -Lbuild \
//          -llockstep_models -llockstep_io -llockstep_kernels -llockstep_core -lhwy -pthread
// Usage: build/verify_cost [threads=1] [model=models/lockstep-code-16m]
#include "models/model.h"
#include <chrono>
#include <cstdio>
using namespace lockstep;
int main(int argc, char** argv){
  ThreadPool::set_default_threads(argc > 1 ? atoi(argv[1]) : 1);
  auto m = load_model(argc > 2 ? argv[2] : "models/lockstep-code-16m");
  std::vector<int32_t> prompt(100); for (int i=0;i<100;++i) prompt[i]=5+i*7;
  for (int T : {1,2,3,4,5,8}) {
    auto seq = m->new_sequence(); ForwardItem p{seq.get(), prompt, ForwardItem::Logits::Last}; m->forward({&p,1});
    std::vector<int32_t> blk(T, 42);
    double best=1e9;
    for (int r=0;r<30;++r){
      auto t0=std::chrono::steady_clock::now();
      ForwardItem it{seq.get(), blk, T==1?ForwardItem::Logits::Last:ForwardItem::Logits::All, true};
      m->forward({&it,1});
      double s=std::chrono::duration<double>(std::chrono::steady_clock::now()-t0).count();
      best=std::min(best,s);
      m->truncate(*seq, 100);
    }
    printf("T=%d  %.3f ms  (%.3f ms/token)\n", T, best*1e3, best*1e3/T);
  }
}
