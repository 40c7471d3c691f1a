// SPDX-License-Identifier: MIT
// IntrusiveFifo: a FIFO of entries that carry their own links, so that queueing allocates nothing
// and an entry leaves from anywhere in O(1) (the admission queue, the request deadlines). An entry
// type T derives from FifoLink<T>; it is in at most one IntrusiveFifo<T> at a time, which does not
// own it. Thread-compatible.
#pragma once

namespace bulkhead::admission {

template <typename T>
class IntrusiveFifo;

template <typename T>
class FifoLink {
 private:
  friend class IntrusiveFifo<T>;
  T* prev_ = nullptr;
  T* next_ = nullptr;
};

template <typename T>
class IntrusiveFifo {
 public:
  // The oldest entry, nullptr when empty.
  T* front() const { return head_; }
  bool empty() const { return head_ == nullptr; }

  // REQUIRES: `entry` is in no fifo.
  void PushBack(T* entry) {
    FifoLink<T>* link = entry;
    link->prev_ = tail_;
    link->next_ = nullptr;
    if (tail_ != nullptr) {
      static_cast<FifoLink<T>*>(tail_)->next_ = entry;
    } else {
      head_ = entry;
    }
    tail_ = entry;
  }

  // REQUIRES: `entry` is in this fifo.
  void Remove(T* entry) {
    FifoLink<T>* link = entry;
    if (link->prev_ != nullptr) {
      static_cast<FifoLink<T>*>(link->prev_)->next_ = link->next_;
    } else {
      head_ = link->next_;
    }
    if (link->next_ != nullptr) {
      static_cast<FifoLink<T>*>(link->next_)->prev_ = link->prev_;
    } else {
      tail_ = link->prev_;
    }
    link->prev_ = link->next_ = nullptr;
  }

 private:
  T* head_ = nullptr;
  T* tail_ = nullptr;
};

}  // namespace bulkhead::admission
