#include "server/http/connection_table.h"

namespace tensorops {
namespace {

// Refused connections answering their 503 at once (each holds a descriptor
// above the cap); past this many a refused connection is closed unanswered.
constexpr int64_t kMaxRefusing = 32;

}  // namespace

ConnectionTable::Admission ConnectionTable::Admit(std::shared_ptr<ConnectionBase>* evict) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t cap = max_connections_;
  if (cap > 0 && open_ >= cap) {
    if (idle_.empty()) {
      Record(HttpClose::kCapRefused);
      if (refusing_ >= kMaxRefusing) return Admission::kDrop;
      ++refusing_;
      return Admission::kRefuse;
    }
    ConnectionBase& oldest = idle_.front();
    idle_.pop_front();
    oldest.evicted = true;
    // Null when it is ending already: its slot is about to be free anyway.
    *evict = oldest.weak_from_this().lock();
    Record(HttpClose::kCapIdle);
  }
  ++open_;
  metrics_->SetOpen(open_);
  return Admission::kOpen;
}

void ConnectionTable::Closed(ConnectionBase* c, bool counted) {
  std::lock_guard<std::mutex> lock(mu_);
  if (c->is_linked()) idle_.erase(idle_.iterator_to(*c));
  if (!counted) {
    --refusing_;
    return;
  }
  --open_;
  metrics_->SetOpen(open_);
}

void ConnectionTable::EnterIdle(ConnectionBase* c) {
  if (max_connections_ <= 0) return;  // nothing to make room for
  std::lock_guard<std::mutex> lock(mu_);
  if (!c->evicted && !c->is_linked()) idle_.push_back(*c);
}

bool ConnectionTable::LeaveIdle(ConnectionBase* c) {
  if (max_connections_ <= 0) return true;
  std::lock_guard<std::mutex> lock(mu_);
  if (c->evicted) return false;
  if (c->is_linked()) idle_.erase(idle_.iterator_to(*c));
  return true;
}

}  // namespace tensorops
