#include "errors.hpp"

#include <new>
#include <system_error>

#include "log.hpp"
#include "strata/errors.hpp"

namespace strata::nccl_net {

abi::Result translate(const char* call, std::exception_ptr error) noexcept {
  abi::Result code = abi::internal_error;
  const char* what = "unknown exception";
  try {
    std::rethrow_exception(error);
  } catch (const NetError& e) {
    code = e.code();
    what = e.what();
  } catch (const strata::InvalidArgument& e) {  // configuration parsed by src/wan
    code = abi::invalid_usage;
    what = e.what();
  } catch (const strata::Error& e) {  // frame decoding in src/wan: a broken peer or link
    code = abi::remote_error;
    what = e.what();
  } catch (const std::bad_alloc&) {
    code = abi::system_error;
    what = "out of memory";
  } catch (const std::system_error& e) {
    code = abi::system_error;
    what = e.what();
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  log::warn("%s failed: %s", call, what);
  return code;
}

}  // namespace strata::nccl_net
