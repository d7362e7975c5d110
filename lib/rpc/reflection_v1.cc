// Each request answered from the generated descriptor pool. A file comes with the files it
// imports that this stream has not sent yet, so a client can build its pool from the answers.
#include "lib/rpc/reflection_v1.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include <set>

namespace yoco {
namespace {

namespace v1 = grpc::reflection::v1;
using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptor;

// `file` and its imports (those not in `sent`), imports first.
void AddFile(const FileDescriptor* file, std::set<std::string>* sent,
             v1::FileDescriptorResponse* out) {
  if (!sent->insert(file->name()).second) return;
  for (int i = 0; i < file->dependency_count(); ++i) AddFile(file->dependency(i), sent, out);
  google::protobuf::FileDescriptorProto proto;
  file->CopyTo(&proto);
  out->add_file_descriptor_proto(proto.SerializeAsString());
}

void Error(grpc::StatusCode code, const std::string& message, v1::ServerReflectionResponse* out) {
  out->mutable_error_response()->set_error_code(code);
  out->mutable_error_response()->set_error_message(message);
}

}  // namespace

grpc::Status ReflectionV1::ServerReflectionInfo(
    grpc::ServerContext*,
    grpc::ServerReaderWriter<v1::ServerReflectionResponse, v1::ServerReflectionRequest>* stream) {
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  std::set<std::string> sent;
  v1::ServerReflectionRequest request;
  while (stream->Read(&request)) {
    v1::ServerReflectionResponse response;
    response.set_valid_host(request.host());
    *response.mutable_original_request() = request;
    switch (request.message_request_case()) {
      case v1::ServerReflectionRequest::kFileByFilename:
        if (const FileDescriptor* file = pool->FindFileByName(request.file_by_filename())) {
          AddFile(file, &sent, response.mutable_file_descriptor_response());
        } else {
          Error(grpc::StatusCode::NOT_FOUND, "file not found", &response);
        }
        break;
      case v1::ServerReflectionRequest::kFileContainingSymbol:
        if (const FileDescriptor* file =
                pool->FindFileContainingSymbol(request.file_containing_symbol())) {
          AddFile(file, &sent, response.mutable_file_descriptor_response());
        } else {
          Error(grpc::StatusCode::NOT_FOUND, "symbol not found", &response);
        }
        break;
      case v1::ServerReflectionRequest::kFileContainingExtension: {
        const auto* type =
            pool->FindMessageTypeByName(request.file_containing_extension().containing_type());
        const auto* extension =
            type == nullptr ? nullptr
                            : pool->FindExtensionByNumber(
                                  type, request.file_containing_extension().extension_number());
        if (extension != nullptr) {
          AddFile(extension->file(), &sent, response.mutable_file_descriptor_response());
        } else {
          Error(grpc::StatusCode::NOT_FOUND, "extension not found", &response);
        }
        break;
      }
      case v1::ServerReflectionRequest::kAllExtensionNumbersOfType: {
        const auto* type = pool->FindMessageTypeByName(request.all_extension_numbers_of_type());
        if (type == nullptr) {
          Error(grpc::StatusCode::NOT_FOUND, "type not found", &response);
          break;
        }
        std::vector<const google::protobuf::FieldDescriptor*> extensions;
        pool->FindAllExtensions(type, &extensions);
        auto* numbers = response.mutable_all_extension_numbers_response();
        numbers->set_base_type_name(type->full_name());
        for (const auto* e : extensions) numbers->add_extension_number(e->number());
        break;
      }
      case v1::ServerReflectionRequest::kListServices:
        for (const std::string& name : services_) {
          response.mutable_list_services_response()->add_service()->set_name(name);
        }
        break;
      case v1::ServerReflectionRequest::MESSAGE_REQUEST_NOT_SET:
        Error(grpc::StatusCode::INVALID_ARGUMENT, "the request names no question", &response);
        break;
    }
    if (!stream->Write(response)) break;
  }
  return grpc::Status::OK;
}

}  // namespace yoco
